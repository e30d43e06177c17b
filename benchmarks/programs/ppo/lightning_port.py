"""cleanrl's ppo_atari_multigpu.py as a Lightning program: the same command line (the script's Args through tyro), its
make_env and Agent imported, one Lightning epoch a PPO iteration (a rollout with the current policy, GAE, then the
update epochs over shuffled minibatches with the approximate-KL early stop), manual optimization in a LightningModule
under Trainer(strategy="ddp", accelerator="cpu", devices=2) and Lightning's own launcher."""

import random

import lightning as L
import numpy as np
import torch
import torch.optim as optim
from ppo_atari_multigpu import Agent, Args, make_env
from standins import gym, tyro
from torch.utils.data import DataLoader

DEVICES = 2


class PPOModule(L.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.automatic_optimization = False
        self.envs = gym.vector.SyncVectorEnv(
            [make_env(args.env_id, i, args.capture_video, "lightning") for i in range(args.local_num_envs)]
        )
        self.agent = Agent(self.envs)

    def configure_optimizers(self):
        return optim.Adam(self.agent.parameters(), lr=self.args.learning_rate, eps=1e-5)

    def train_dataloader(self):
        # one item a Lightning epoch: each epoch is one PPO iteration (its data are the rollout collected in it)
        # round 1: a generator of its own, so that iterating it leaves the global one (the policy's sampling) alone
        return DataLoader(list(range(1)), batch_size=1, generator=torch.Generator())

    def setup(self, stage):
        # CRUCIAL (as the script): a different seed for each data parallelism worker
        seed = self.args.seed + self.global_rank
        random.seed(seed)
        np.random.seed(seed)
        # round 2: torch too (the script re-seeds torch with seed + rank once the model is built, for the sampling)
        torch.manual_seed(seed)
        self.next_obs, _ = self.envs.reset(seed=seed)

    def on_train_start(self):
        args = self.args
        shape = (args.num_steps, args.local_num_envs)
        self.obs = torch.zeros(shape + self.envs.single_observation_space.shape, device=self.device)
        self.actions = torch.zeros(shape + self.envs.single_action_space.shape, device=self.device)
        self.logprobs = torch.zeros(shape, device=self.device)
        self.rewards = torch.zeros(shape, device=self.device)
        self.dones = torch.zeros(shape, device=self.device)
        self.values = torch.zeros(shape, device=self.device)
        self.next_obs = torch.Tensor(self.next_obs).to(self.device)
        self.next_done = torch.zeros(args.local_num_envs, device=self.device)

    def on_train_epoch_start(self):
        args = self.args
        if args.anneal_lr:
            frac = 1.0 - self.current_epoch / args.num_iterations
            self.optimizers().param_groups[0]["lr"] = frac * args.learning_rate

    def collect_rollout(self):
        args = self.args
        for step in range(args.num_steps):
            self.obs[step] = self.next_obs
            self.dones[step] = self.next_done
            with torch.no_grad():
                action, logprob, _, value = self.agent.get_action_and_value(self.next_obs)
                self.values[step] = value.flatten()
            self.actions[step] = action
            self.logprobs[step] = logprob
            next_obs, reward, terminations, truncations, infos = self.envs.step(action.cpu().numpy())
            next_done = np.logical_or(terminations, truncations)
            self.rewards[step] = torch.tensor(reward).to(self.device).view(-1)
            self.next_obs = torch.Tensor(next_obs).to(self.device)
            self.next_done = torch.Tensor(next_done).to(self.device)

    def advantages(self):
        args = self.args
        with torch.no_grad():
            next_value = self.agent.get_value(self.next_obs).reshape(1, -1)
            advantages = torch.zeros_like(self.rewards)
            lastgaelam = 0
            for t in reversed(range(args.num_steps)):
                if t == args.num_steps - 1:
                    nextnonterminal = 1.0 - self.next_done
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - self.dones[t + 1]
                    nextvalues = self.values[t + 1]
                delta = self.rewards[t] + args.gamma * nextvalues * nextnonterminal - self.values[t]
                advantages[t] = lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
            returns = advantages + self.values
        return advantages, returns

    def training_step(self, batch, batch_idx):
        args = self.args
        opt = self.optimizers()
        self.collect_rollout()
        advantages, returns = self.advantages()

        b_obs = self.obs.reshape((-1,) + self.envs.single_observation_space.shape)
        b_logprobs = self.logprobs.reshape(-1)
        b_actions = self.actions.reshape((-1,) + self.envs.single_action_space.shape)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = self.values.reshape(-1)

        b_inds = np.arange(args.local_batch_size)
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, args.local_batch_size, args.local_minibatch_size):
                mb_inds = b_inds[start : start + args.local_minibatch_size]
                _, newlogprob, entropy, newvalue = self.agent.get_action_and_value(
                    b_obs[mb_inds], b_actions.long()[mb_inds]
                )
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()
                with torch.no_grad():
                    approx_kl = ((ratio - 1) - logratio).mean()

                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(
                        newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef
                    )
                    v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
                else:
                    v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()
                entropy_loss = entropy.mean()
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

                opt.zero_grad()
                self.manual_backward(loss)  # DDP averages the gradients over the ranks
                self.clip_gradients(opt, gradient_clip_val=args.max_grad_norm, gradient_clip_algorithm="norm")
                opt.step()

            if args.target_kl is not None and approx_kl > args.target_kl:
                break
        self.log("losses/loss", loss, prog_bar=True)


def main():
    args = tyro.cli(Args)
    args.world_size = DEVICES
    args.local_batch_size = int(args.local_num_envs * args.num_steps)
    args.local_minibatch_size = int(args.local_batch_size // args.num_minibatches)
    args.num_envs = args.local_num_envs * args.world_size
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    L.seed_everything(args.seed)
    model = PPOModule(args)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=DEVICES,
        max_epochs=args.num_iterations,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
    )
    trainer.fit(model)


if __name__ == "__main__":
    main()
