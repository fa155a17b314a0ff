"""Edge-type-aware GraphSAGE product embeddings (design §3.4), trained by link prediction.

Glossary of dimensions:
    N   nodes (products, then categories, in ``ProductGraph.nodes`` order)
    D0  layer-0 features: sku 64 + pseudo-brand 32 + category 32 + price tier 16 = 144
    H   hidden and output width (256)
    R   relations: copurchase, substitution, hierarchy (each used in both directions)

Layer l (l = 1, 2):  h_v = σ(W_l · [h_v ‖ agg_cop(h) ‖ agg_sub(h) ‖ agg_hier(h)]),
with agg_r(h)_v = Σ_{u∈N_r(v)} w_uv · h_u / |N_r(v)| (the spec's weighted mean) and σ = ReLU on
layer 1 only (layer 2 is the embedding). Category nodes take part in message passing; their
layer-0 features are their own category embedding plus a "category" tier. Training: for each
relation, the score cos(z_u, z_v) / τ + b_r separates true edges from edges whose destination
is replaced by a uniformly drawn node (``negatives`` per edge), binary cross-entropy averaged
over relations so the rare substitution edges weigh as much as the many co-purchase ones. A
cosine objective makes related products *close* in the embedding space (design §3.4.3); a
DistMult score fitted the edges just as well but left complements farther apart than random
pairs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

os.environ.setdefault("DGLBACKEND", "pytorch")  # DGL would otherwise write a config into $HOME

import dgl
import dgl.function as fn
import torch
import torch.nn as nn
import torch.nn.functional as F

from retailsim_core.models.determinism import deterministic_kernels
from retailsim_core.models.gnn.pair_product import pair_dot

RELATIONS = ("copurchase", "substitution", "hierarchy")


@dataclass(frozen=True)
class GraphSAGEConfig:
    sku_dim: int = 64  # per-product embedding
    brand_dim: int = 32  # pseudo-brand embedding
    category_dim: int = 32  # sub-commodity (products) or own category (category nodes)
    tier_dim: int = 16  # value / mid / premium / category
    hidden_dim: int = 256  # width of both layers' outputs (spec: 256-d)
    epochs: int = 60
    lr: float = 5e-3
    weight_decay: float = 1e-5
    negatives: int = 5  # corrupted destinations per positive edge
    max_edges_per_relation: int = 20_000  # positives sampled per relation and epoch
    temperature: float = 0.2  # τ of the cosine score
    seed: int = 0

    @property
    def input_dim(self) -> int:
        return self.sku_dim + self.brand_dim + self.category_dim + self.tier_dim


@dataclass(frozen=True)
class NodeIds:
    """Integer inputs of layer 0, one entry per node (0 = none)."""

    sku: torch.Tensor  # (N,) product index + 1, 0 for categories
    brand: torch.Tensor  # (N,) pseudo-brand id + 1, 0 for categories / unknown
    category: torch.Tensor  # (N,) category vocabulary index
    tier: torch.Tensor  # (N,) 0 value, 1 mid, 2 premium, 3 category


class NodeEncoder(nn.Module):
    """Layer 0: concat of the four learned embeddings. (N,) ids -> (N, D0)."""

    def __init__(self, cfg: GraphSAGEConfig, n_sku: int, n_brand: int, n_category: int):
        super().__init__()
        self.sku = nn.Embedding(n_sku + 1, cfg.sku_dim, padding_idx=0)
        self.brand = nn.Embedding(n_brand + 1, cfg.brand_dim, padding_idx=0)
        self.category = nn.Embedding(n_category, cfg.category_dim)
        self.tier = nn.Embedding(4, cfg.tier_dim)

    def forward(self, ids: NodeIds) -> torch.Tensor:
        return torch.cat(
            [
                self.sku(ids.sku),
                self.brand(ids.brand),
                self.category(ids.category),
                self.tier(ids.tier),
            ],
            dim=-1,
        )  # (N, D0)


class EdgeTypeSAGELayer(nn.Module):
    """One hop: weighted mean per relation, concatenated with the node's own state."""

    def __init__(self, in_dim: int, out_dim: int, activation: bool):
        super().__init__()
        self.linear = nn.Linear(in_dim * (1 + len(RELATIONS)), out_dim)
        self.activation = activation

    def forward(self, graphs: list[dgl.DGLGraph], h: torch.Tensor) -> torch.Tensor:
        parts = [h]
        for sub in graphs:  # one homogeneous graph per relation, in RELATIONS order
            with sub.local_scope():
                sub.ndata["h"] = h
                sub.update_all(fn.u_mul_e("h", "weight", "m"), fn.mean("m", "agg"))  # (N, in)
                parts.append(sub.ndata["agg"])
        out = self.linear(torch.cat(parts, dim=-1))  # (N, out)
        return F.relu(out) if self.activation else out


class ProductGraphSAGE(nn.Module):
    def __init__(self, cfg: GraphSAGEConfig, n_sku: int, n_brand: int, n_category: int):
        super().__init__()
        self.encoder = NodeEncoder(cfg, n_sku, n_brand, n_category)
        self.layer1 = EdgeTypeSAGELayer(cfg.input_dim, cfg.hidden_dim, activation=True)
        self.layer2 = EdgeTypeSAGELayer(cfg.hidden_dim, cfg.hidden_dim, activation=False)
        self.bias = nn.Parameter(torch.zeros(len(RELATIONS)))
        self.temperature = cfg.temperature

    def forward(self, graphs: list[dgl.DGLGraph], ids: NodeIds) -> torch.Tensor:
        x = self.encoder(ids)  # (N, 144)
        return self.layer2(graphs, self.layer1(graphs, x))  # (N, 256)

    def score(
        self, unit: torch.Tensor, rel: int, src: torch.Tensor, dst: torch.Tensor
    ) -> torch.Tensor:
        """Cosine score of node pairs; ``unit`` are the L2-normalised embeddings (N, H). The
        pairs' dot products come from one compiled pass where available, the same bytes as
        PyTorch's gathers, product and sum (D104)."""
        return pair_dot(unit, src, dst) / self.temperature + self.bias[rel]  # (E,)


def model_graph(
    edges: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]], n_nodes: int
) -> list[dgl.DGLGraph]:
    """One graph per relation (RELATIONS order), each edge in both directions, weights in
    ``edata['weight']``. Built once: slicing a heterograph per call costs more than the hop."""
    graphs = []
    for rel in RELATIONS:
        s, d, w = edges[rel]
        g = dgl.graph((torch.cat([s, d]), torch.cat([d, s])), num_nodes=n_nodes)
        g.edata["weight"] = torch.cat([w, w]).float()
        graphs.append(g)
    return graphs


def link_prediction_loss(
    model: ProductGraphSAGE, z: torch.Tensor, edges, cfg: GraphSAGEConfig, gen: torch.Generator
) -> torch.Tensor:
    losses = []
    n = z.shape[0]
    unit = F.normalize(z, dim=-1)  # once per step, not per pair
    for r, rel in enumerate(RELATIONS):
        s, d, _ = edges[rel]
        if len(s) == 0:
            continue
        if len(s) > cfg.max_edges_per_relation:
            pick = torch.randperm(len(s), generator=gen)[: cfg.max_edges_per_relation]
            s, d = s[pick], d[pick]
        pos = model.score(unit, r, s, d)
        neg_src = s.repeat(cfg.negatives)
        neg_dst = torch.randint(0, n, (len(neg_src),), generator=gen)
        neg = model.score(unit, r, neg_src, neg_dst)
        losses.append(
            F.binary_cross_entropy_with_logits(pos, torch.ones_like(pos))
            + F.binary_cross_entropy_with_logits(neg, torch.zeros_like(neg))
        )
    return torch.stack(losses).mean()


def train(
    g: list[dgl.DGLGraph],
    ids: NodeIds,
    edges,
    sizes: tuple[int, int, int],
    cfg: GraphSAGEConfig,
    progress=None,
) -> tuple[ProductGraphSAGE, list[float]]:
    """Full-batch training on CPU; returns the model and the loss per epoch (same seed, same
    bytes).
    """
    with deterministic_kernels():
        return _train(g, ids, edges, sizes, cfg, progress)


def _train(g, ids, edges, sizes, cfg, progress):
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    model = ProductGraphSAGE(cfg, *sizes)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    history = []
    for epoch in range(cfg.epochs):
        opt.zero_grad()
        loss = link_prediction_loss(model, model(g, ids), edges, cfg, gen)
        loss.backward()
        opt.step()
        history.append(float(loss.detach()))
        if progress:
            progress(epoch, history[-1])
    return model, history
