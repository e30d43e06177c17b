# ruff: noqa
import os  # changed: the logs folder is made here
import time
import torch
import sys
import subprocess

argslist = list(sys.argv)[1:]
num_gpus = 2  # changed: CPU, 2 ranks (no GPUs to count)
argslist.append("--n_gpus={}".format(num_gpus))
workers = []
job_id = time.strftime("%Y_%m_%d-%H%M%S")
argslist.append("--group_name=group_{}".format(job_id))

os.makedirs("logs", exist_ok=True)  # changed: rank 1 logs there; made if missing
for i in range(num_gpus):
    argslist.append("--rank={}".format(i))
    stdout = None if i == 0 else open("logs/{}_GPU_{}.log".format(job_id, i), "w")
    print(argslist)
    p = subprocess.Popen([str(sys.executable)] + argslist, stdout=stdout)
    workers.append(p)
    argslist = argslist[:-1]

codes = [p.wait() for p in workers]  # changed: a failed rank fails the launch (the harness reads the status)
sys.exit(max(codes, key=abs))  # changed: as above
