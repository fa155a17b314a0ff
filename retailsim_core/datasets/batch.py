"""The world model's batch: one typed mapping for training, evaluation and serving alike.

``TrainingSet[rows]`` (baskets that happened) and ``ServingData.batch`` (a customer walking into
a store) both end in :func:`to_batch`, so the two can never disagree on a key, a shape or a
dtype. A ``TypedDict`` rather than a dataclass: training adds and replaces keys per step
(``{**batch, "tokens": ...}``) and the ONNX export feeds the values in ``ONNX_INPUTS`` order.

Glossary (design §4): B baskets, L basket slots (products, then [EOS], then [PAD]), P price
features per slot (T4), H history trips, K history products (the trips' products, flattened),
U distinct history products of a basket, V vocabulary, S shelf features per product.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np
import torch


class Batch(TypedDict, total=False):
    # The basket (T2, T4): what is predicted; all [PAD] and zeros where nothing is known.
    tokens: torch.Tensor  # (B, L) int64 product tokens, [EOS] after the last product
    item_mask: torch.Tensor  # (B, L) bool, True at non-[PAD] slots
    item_prices: torch.Tensor  # (B, L, P) float32 T4 price features of each slot's product
    shelf: torch.Tensor  # (B, V, S) float32 every product's shelf features at the store-week
    # The customer's history (trips before the basket's week only).
    history_items: torch.Tensor  # (K,) int64 product tokens of the history trips, flattened
    history_offsets: torch.Tensor  # (B * H,) int64 start of each trip's products in K
    history_mask: torch.Tensor  # (B, H) bool, True at real trips
    history_context: torch.Tensor  # (B, H, 2) int64 each trip's mission type and focus
    history_days_before: torch.Tensor  # (B, H) days between each trip and the basket
    repeat_products: torch.Tensor  # (B, U) int64 distinct history products, [PAD]-padded
    repeat_values: torch.Tensor  # (B, U, F) float32 their repeat features (HISTORY_FEATURES)
    season: torch.Tensor  # (B, V, 2) float32 seasonal lifts of every product at the basket day
    history_alpha: torch.Tensor  # (B,) float32 the design's personal-vs-global weight (§4.2.1)
    # Who, when, where (T1, T3, T5) and what is known of the basket (T6).
    customer_codes: torch.Tensor  # (B, 2) int64 price-sensitivity and lifestage codes (T1)
    customer_numeric: torch.Tensor  # (B, F1) float32 the customer's snapshot as of the week
    calendar: torch.Tensor  # (B, 7) float32 ISO week, weekday, hour, holiday, season, ... (T3)
    store_codes: torch.Tensor  # (B, 3) int64 store, format and region codes (T5)
    store_numeric: torch.Tensor  # (B, 4) float32 the store's features as of the week
    store_is_new: torch.Tensor  # (B,) bool, True when the store has no history before the week
    basket_labels: torch.Tensor  # (B, 4) int64 mission type, focus, price sensitivity, size
    #                              codes (T6); 0 = unknown, which is all a prediction is told
    cold_start: torch.Tensor  # (B,) bool, serving only: the customer has no earlier trip


# Keys whose arrays become int64 tensors (codes and tokens), whatever integer type they come in.
INTEGER_KEYS = frozenset({"customer_codes", "store_codes", "basket_labels", "history_context"})


def to_batch(arrays: dict[str, np.ndarray]) -> Batch:
    """Tensors of ``arrays`` (keys of ``Batch``), sharing memory where the array allows."""
    unknown = set(arrays) - set(Batch.__annotations__)
    if unknown:
        raise KeyError(f"not a batch key: {sorted(unknown)}")
    return Batch(
        **{
            key: torch.from_numpy(
                np.ascontiguousarray(value.astype(np.int64) if key in INTEGER_KEYS else value)
            )
            for key, value in arrays.items()
        }
    )


# The flat history: its items are cut to the rows' trips, not sliced by row.
FLAT_KEYS = frozenset({"history_items", "history_offsets"})


def batch_range(batch: Batch, start: int, stop: int) -> Batch:
    """Rows [start, stop) of ``batch`` (views): every per-row key sliced, the flat history items
    cut to those rows' trips and their bag offsets rebased to them."""
    out = Batch(**{k: v[start:stop] for k, v in batch.items() if k not in FLAT_KEYS})
    if "history_offsets" in batch:
        offsets, items = batch["history_offsets"], batch["history_items"]
        trips = batch["history_mask"].shape[1]  # H bags per row

        def item_at(bag: int) -> int:
            return int(offsets[bag]) if bag < len(offsets) else len(items)

        first, last = item_at(start * trips), item_at(stop * trips)
        out["history_offsets"] = offsets[start * trips : stop * trips] - first
        out["history_items"] = items[first:last]
    return out
