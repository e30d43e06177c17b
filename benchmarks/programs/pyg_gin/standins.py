"""Stand-ins for what pytorch_geometric's examples/multi_gpu/distributed_batching.py imports and this machine lacks
(torch_geometric, torch_sparse, ogb): only the pieces the script uses, in plain torch/numpy (not the authors' code).

- ogb: `PygGraphPropPredDataset` (a data set of small synthetic molecule-like graphs generated from a fixed numpy
  seed in the constructor, with ogb's `num_tasks` and `get_idx_split()`, indexable by an index tensor as a PyG data
  set is; the `pre_transform` applied once to every graph, as processing does; `root` is not read: nothing is
  downloaded or written), `Evaluator` (ogbg-molhiv's `rocauc`: the mean over tasks with both classes of the ROC-AUC of
  the labelled rows), `AtomEncoder` / `BondEncoder` (a sum of one `Embedding` per feature column, xavier-uniform
  initialised, ogb's feature dimensions);
- torch_sparse: a minimal `SparseTensor` (row, col, value, sparse sizes) with `coo()`, `set_value(..., layout='coo')`
  and `to()`;
- torch_geometric: `Data`, `Batch` (graphs collated: node features and labels concatenated, the adjacencies as one
  block-diagonal `adj_t`, the `batch` vector, `ptr`, `num_graphs`; `.to()`), `transforms.ToSparseTensor(attr=...)`
  (edge_index + edge_attr into the transposed adjacency `adj_t`, sorted by target then source),
  `loader.DataLoader` (torch's DataLoader with the collater), `nn.GINEConv(nn, train_eps=True)` with PyG's semantics
  (message relu(x_j + edge_attr), sum aggregation at the target, `nn((1 + eps) * x + aggregate)`, eps a parameter
  reset to 0, `reset(nn)` at construction re-initialising the children of `nn` as PyG's `reset_parameters` does) and
  `nn.global_mean_pool`.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn as tnn

# ogb.utils.features.get_atom_feature_dims() / get_bond_feature_dims()
ATOM_FEATURE_DIMS = [119, 5, 12, 12, 10, 6, 6, 2, 2]
BOND_FEATURE_DIMS = [5, 6, 2]

NUM_GRAPHS = 320  # a few hundred graphs: 256 train, 32 valid, 32 test
SPLIT = (256, 32, 32)
SEED = 0


# ---- torch_sparse ----


class SparseTensor:
    def __init__(self, row, col, value=None, sparse_sizes=None):
        self.row, self.col, self.value = row, col, value
        self.sparse_sizes = (
            tuple(sparse_sizes) if sparse_sizes is not None else (int(row.max()) + 1, int(col.max()) + 1)
        )

    def coo(self):
        return self.row, self.col, self.value

    def set_value(self, value, layout=None):
        assert layout in (None, "coo")
        return SparseTensor(self.row, self.col, value, self.sparse_sizes)

    def to(self, device):
        value = self.value.to(device) if self.value is not None else None
        return SparseTensor(self.row.to(device), self.col.to(device), value, self.sparse_sizes)

    def nnz(self):
        return self.row.numel()


WITH_TORCH_SPARSE = True  # the stand-in SparseTensor above


# ---- torch_geometric.data ----


class Data:
    def __init__(self, **kwargs):
        for key, value in kwargs.items():
            setattr(self, key, value)

    def keys(self):
        return list(vars(self))


class Batch(Data):
    def to(self, device):
        for key, value in vars(self).items():
            if isinstance(value, (torch.Tensor, SparseTensor)):
                setattr(self, key, value.to(device))
        return self


def collate(graphs):
    xs, ys, rows, cols, values, batch, ptr = [], [], [], [], [], [], [0]
    offset = 0
    for i, g in enumerate(graphs):
        n = g.num_nodes
        xs.append(g.x)
        ys.append(g.y)
        row, col, value = g.adj_t.coo()
        rows.append(row + offset)
        cols.append(col + offset)
        values.append(value)
        batch.append(torch.full((n,), i, dtype=torch.long))
        offset += n
        ptr.append(offset)
    adj_t = SparseTensor(torch.cat(rows), torch.cat(cols), torch.cat(values), (offset, offset))
    return Batch(
        x=torch.cat(xs),
        y=torch.cat(ys),
        adj_t=adj_t,
        batch=torch.cat(batch),
        ptr=torch.tensor(ptr),
        num_graphs=len(graphs),
        num_nodes=offset,
    )


class Collater:
    def __init__(self, dataset, follow_batch=None, exclude_keys=None):
        self.dataset, self.follow_batch, self.exclude_keys = dataset, follow_batch, exclude_keys

    def __call__(self, batch):
        return collate(batch)


# ---- torch_geometric.loader ----


class DataLoader(torch.utils.data.DataLoader):
    def __init__(self, dataset, batch_size=1, shuffle=False, follow_batch=None, exclude_keys=None, **kwargs):
        kwargs.pop("collate_fn", None)
        self.follow_batch = follow_batch
        self.exclude_keys = exclude_keys
        super().__init__(
            dataset, batch_size, shuffle, collate_fn=Collater(dataset, follow_batch, exclude_keys), **kwargs
        )


# ---- torch_geometric.transforms ----


class ToSparseTensor:
    def __init__(self, attr="edge_weight", remove_edge_index=True):
        self.attr, self.remove_edge_index = attr, remove_edge_index

    def __call__(self, data):
        n = data.num_nodes
        src, dst = data.edge_index
        perm = torch.argsort(dst * n + src)  # sorted by target (adj_t's row), then source
        value = getattr(data, self.attr)[perm]
        data.adj_t = SparseTensor(row=dst[perm], col=src[perm], value=value, sparse_sizes=(n, n))
        if self.remove_edge_index:
            del data.edge_index
            delattr(data, self.attr)
        return data


# ---- torch_geometric.nn ----


def reset(nn):
    def _reset(item):
        if hasattr(item, "reset_parameters"):
            item.reset_parameters()

    if nn is not None:
        if hasattr(nn, "children") and len(list(nn.children())) > 0:
            for item in nn.children():
                _reset(item)
        else:
            _reset(nn)


class GINEConv(tnn.Module):
    def __init__(self, nn, eps=0.0, train_eps=False, edge_dim=None, **kwargs):
        super().__init__()
        self.nn = nn
        self.initial_eps = eps
        if train_eps:
            self.eps = tnn.Parameter(torch.empty(1))
        else:
            self.register_buffer("eps", torch.empty(1))
        assert edge_dim is None
        self.lin = None
        self.reset_parameters()

    def reset_parameters(self):
        reset(self.nn)
        self.eps.data.fill_(self.initial_eps)

    def forward(self, x, edge_index, edge_attr=None, size=None):
        assert isinstance(edge_index, SparseTensor)
        row, col, edge_attr = edge_index.coo()  # adj_t: row the target, col the source
        if x.size(-1) != edge_attr.size(-1):
            raise ValueError("Node and edge feature dimensionalities do not match. Consider setting 'edge_dim'.")
        msg = (x.index_select(0, col) + edge_attr).relu()
        out = torch.zeros_like(x).index_add_(0, row, msg)
        out = out + (1 + self.eps) * x
        return self.nn(out)


def global_mean_pool(x, batch, size=None):
    size = int(batch.max()) + 1 if size is None else size
    total = torch.zeros(size, x.size(-1), dtype=x.dtype).index_add_(0, batch, x)
    count = torch.zeros(size, dtype=x.dtype).index_add_(0, batch, torch.ones_like(batch, dtype=x.dtype))
    return total / count.clamp(min=1).unsqueeze(-1)


# ---- ogb ----


class AtomEncoder(tnn.Module):
    def __init__(self, emb_dim):
        super().__init__()
        self.atom_embedding_list = tnn.ModuleList()
        for dim in ATOM_FEATURE_DIMS:
            emb = tnn.Embedding(dim, emb_dim)
            tnn.init.xavier_uniform_(emb.weight.data)
            self.atom_embedding_list.append(emb)

    def forward(self, x):
        x_embedding = 0
        for i in range(x.shape[1]):
            x_embedding = x_embedding + self.atom_embedding_list[i](x[:, i])
        return x_embedding


class BondEncoder(tnn.Module):
    def __init__(self, emb_dim):
        super().__init__()
        self.bond_embedding_list = tnn.ModuleList()
        for dim in BOND_FEATURE_DIMS:
            emb = tnn.Embedding(dim, emb_dim)
            tnn.init.xavier_uniform_(emb.weight.data)
            self.bond_embedding_list.append(emb)

    def forward(self, edge_attr):
        bond_embedding = 0
        for i in range(edge_attr.shape[1]):
            bond_embedding = bond_embedding + self.bond_embedding_list[i](edge_attr[:, i])
        return bond_embedding


def molecule(rng):
    """A molecule-like graph: a random tree of 6-14 atoms plus up to two ring-closing bonds, both directions of each
    bond; atom and bond features drawn within ogb's dimensions (mostly carbon-like); the label 1 when the graph has
    a ring and at least two heteroatoms (atom type 7 or 8)."""
    n = int(rng.randint(6, 15))
    atom = rng.choice([5, 6, 7, 8, 16], size=n, p=[0.05, 0.6, 0.15, 0.15, 0.05])
    x = np.stack([atom] + [rng.randint(0, min(d, 4), size=n) for d in ATOM_FEATURE_DIMS[1:]], axis=1)
    bonds = [(int(rng.randint(0, i)), i) for i in range(1, n)]
    rings = 0
    for _ in range(int(rng.randint(0, 3))):
        a, b = (int(v) for v in rng.choice(n, size=2, replace=False))
        if (a, b) not in bonds and (b, a) not in bonds:
            bonds.append((a, b))
            rings += 1
    attr = np.stack([rng.randint(0, min(d, 4), size=len(bonds)) for d in BOND_FEATURE_DIMS], axis=1)
    src = [a for a, b in bonds] + [b for a, b in bonds]
    dst = [b for a, b in bonds] + [a for a, b in bonds]
    label = int(rings > 0 and int(np.isin(atom, [7, 8]).sum()) >= 2)
    return Data(
        x=torch.as_tensor(x, dtype=torch.long),
        edge_index=torch.tensor([src, dst], dtype=torch.long),
        edge_attr=torch.as_tensor(np.concatenate([attr, attr]), dtype=torch.long),
        y=torch.tensor([[label]], dtype=torch.long),
        num_nodes=n,
    )


class PygGraphPropPredDataset(torch.utils.data.Dataset):
    def __init__(self, name, root="dataset", transform=None, pre_transform=None, graphs=None, split=None):
        self.name = name
        self.root = root
        self.transform = transform
        self.pre_transform = pre_transform
        self.num_tasks = 1  # ogbg-molhiv: one binary task
        self.eval_metric = "rocauc"
        if graphs is None:
            rng = np.random.RandomState(SEED)
            graphs = [molecule(rng) for _ in range(NUM_GRAPHS)]
            if pre_transform is not None:
                graphs = [pre_transform(g) for g in graphs]
        self.graphs = graphs
        self.split = split

    def get_idx_split(self):
        a, b, c = SPLIT
        return {
            "train": torch.arange(0, a),
            "valid": torch.arange(a, a + b),
            "test": torch.arange(a + b, a + b + c),
        }

    def __len__(self):
        return len(self.graphs)

    def __getitem__(self, idx):
        if isinstance(idx, (int, np.integer)) or (isinstance(idx, torch.Tensor) and idx.dim() == 0):
            g = self.graphs[int(idx)]
            return self.transform(g) if self.transform is not None else g
        if isinstance(idx, slice):
            idx = range(len(self))[idx]
        graphs = [self.graphs[int(i)] for i in idx]
        return PygGraphPropPredDataset(self.name, self.root, self.transform, self.pre_transform, graphs=graphs)


def _roc_auc(y_true, y_score):
    """sklearn's roc_auc_score for binary labels: the Mann-Whitney statistic with ties given the average rank."""
    order = np.argsort(y_score, kind="mergesort")
    ranks = np.empty(len(y_score), dtype=np.float64)
    sorted_scores = y_score[order]
    i = 0
    while i < len(sorted_scores):
        j = i
        while j + 1 < len(sorted_scores) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1
        i = j + 1
    pos = y_true == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    return (ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


class Evaluator:
    def __init__(self, name):
        self.name = name
        self.num_tasks = 1
        self.eval_metric = "rocauc"

    def eval(self, input_dict):
        y_true, y_pred = input_dict["y_true"], input_dict["y_pred"]
        if isinstance(y_true, torch.Tensor):
            y_true = y_true.detach().cpu().numpy()
        if isinstance(y_pred, torch.Tensor):
            y_pred = y_pred.detach().cpu().numpy()
        assert y_true.shape == y_pred.shape and y_true.ndim == 2 and y_true.shape[1] == self.num_tasks
        rocauc_list = []
        for i in range(y_true.shape[1]):
            if np.sum(y_true[:, i] == 1) > 0 and np.sum(y_true[:, i] == 0) > 0:
                is_labeled = y_true[:, i] == y_true[:, i]
                rocauc_list.append(_roc_auc(y_true[is_labeled, i], y_pred[is_labeled, i]))
        if len(rocauc_list) == 0:
            raise RuntimeError("No positively labeled data available. Cannot compute ROC-AUC.")
        return {"rocauc": sum(rocauc_list) / len(rocauc_list)}
