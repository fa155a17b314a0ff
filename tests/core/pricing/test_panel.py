"""The pricing panel: observed price ranges, and its cached scoring against the model's own."""

import numpy as np
import polars as pl
import pytest
import torch

from retailsim_core.counterfactual.simulate import expected_units
from retailsim_core.datasets.shelf import SHELF_FEATURES
from retailsim_core.pricing.panel import category_prices


def test_category_prices_are_the_central_range_around_the_median_regular_price():
    # A: 20 cells at 2.0, one cut to 1.5, one rise to 2.2, and one error at 30.0 (a pack price).
    paid = [2.0] * 20 + [1.5, 2.2, 30.0]
    cells = pl.LazyFrame(
        {
            "product_id": ["A"] * len(paid) + ["B"],
            "actual_price": paid + [4.0],
            "base_price": [2.0] * len(paid) + [4.0],
            "units": [1] * len(paid) + [2],
        }
    )
    out = category_prices(cells).collect()
    a = out.row(0, named=True)
    assert a["product_id"] == "A" and a["regular_price"] == 2.0
    # The 5% and 95% quantiles: the error does not open the range to 15 x the regular price.
    assert a["low"] == pytest.approx(1.0) and a["high"] == pytest.approx(1.1)
    assert a["revenue"] == pytest.approx(sum(paid))
    assert out.row(1, named=True)["low"] == out.row(1, named=True)["high"] == 1.0


def test_the_fixture_exercises_every_part_of_the_cached_slot(tiny_pricing):
    """The oracle below means something only if priced products feed other columns through
    the substitute graph and sit in the customers' repeat histories."""
    cache = tiny_pricing["half"].panels[0].cache
    assert cache.edge_src.numel() > 0 and cache.columns.numel() > cache.n
    assert cache.repeat is not None and (cache.repeat_at < cache.n).any()


def _regular(shelf, products):
    """The oracle's regular shelf: the category's price cuts undone, column by column."""
    out = shelf.clone()
    lp, depth_i, promo_i = 0, 1, 2  # log relative price, discount depth, promo flag
    assert SHELF_FEATURES[:3] == ("log_relative_price", "discount_depth", "promo_flag")
    for j in products.tolist():
        depth = shelf[:, j, depth_i]
        out[:, j, lp] = shelf[:, j, lp] - torch.log(1 - depth) * shelf[:, j, 3]
        out[:, j, depth_i] = 0
        out[:, j, promo_i] = 0
    return out


@pytest.mark.parametrize("priced", ["panel", "half"])
def test_cached_scoring_equals_the_models_expected_units(tiny_pricing, priced):
    """Oracle: the panel's one-slot scoring of a price vector is the model's full forward pass
    (``simulation.expected_units``) on the regular shelf repriced by the same multipliers."""
    panel = tiny_pricing[priced]
    model = tiny_pricing["model" if priced == "panel" else "half_model"]
    rng = np.random.default_rng(0)
    candidates = torch.as_tensor(rng.uniform(-0.3, 0.3, size=(3, panel.n)))
    for w, batch in enumerate(tiny_pricing["batches"]):
        size = panel.panels[w].size
        regular = {**batch, "shelf": _regular(batch["shelf"], panel.products)}
        many = panel.units_many(w, candidates)
        for k, log_m in enumerate(candidates):
            full = torch.zeros(model.vocab_size)
            full[panel.products] = log_m.float()
            with torch.no_grad():
                ref = expected_units(model, regular, size, full)[panel.products]
            assert panel.units(w, log_m).detach().numpy() == pytest.approx(
                ref.double().numpy(), rel=1e-4, abs=1e-7
            )
            assert many[k].detach().numpy() == pytest.approx(ref.double().numpy(), rel=1e-4)
        with torch.no_grad():
            hist = expected_units(model, batch, size)[panel.products]
        assert panel.panels[w].historical_units.numpy() == pytest.approx(
            hist.double().numpy(), rel=1e-4
        )


def test_the_allowed_range_holds_the_regular_price(tiny_pricing):
    panel = tiny_pricing["panel"]
    assert (panel.low <= 0).all() and (panel.high >= 0).all() and panel.n >= 2
    assert (panel.regular_price > 0).all()


def test_a_margin_floor_raises_the_lowest_allowed_price(tiny_pricing):
    """cost = 70% of the regular price; a 20% markup floor allows no price under 0.84 x
    regular, and a floor above the regular price still leaves the regular price allowed."""
    from retailsim_core.pricing.panel import build_panel

    model, rows, batches = tiny_pricing["model"], tiny_pricing["rows"], tiny_pricing["batches"]
    tokens = rows["token"].to_numpy()
    floor = build_panel(model, [12, 13, 14], batches, tokens, rows, floor_markup=0.2)
    free = tiny_pricing["panel"]
    assert (floor.low >= np.log(0.84) - 1e-12).all()
    assert (floor.low >= free.low).all() and (floor.high == free.high).all()
    high_floor = build_panel(model, [12, 13, 14], batches, tokens, rows, floor_markup=1.0)
    assert (high_floor.low == 0.0).all()


def test_units_per_line_scale_each_lines_units_by_the_stock_up_at_its_price(tiny_pricing):
    from retailsim_core.pricing.panel import UnitsPerLine, build_panel

    model, rows, batches = tiny_pricing["model"], tiny_pricing["rows"], tiny_pricing["batches"]
    free = tiny_pricing["panel"]
    mean = np.linspace(1.0, 2.0, free.n)
    per_line = UnitsPerLine(mean, elasticity=-1.5)
    panel = build_panel(model, [12, 13, 14], batches, rows["token"].to_numpy(), rows,
                        per_line=per_line)  # fmt: skip
    log_m = torch.linspace(-0.3, 0.2, free.n, dtype=torch.float64)
    factor = 1 + (mean - 1) * np.exp(-1.5 * log_m.numpy())  # (n,)
    with torch.no_grad():
        got, plain = panel.units(1, log_m).numpy(), free.units(1, log_m).numpy()
    np.testing.assert_allclose(got, plain * factor, rtol=1e-10)
    # the historical baskets at their own shelf: each context's own price multiplier
    week = free.panels[0]
    own = 1 + (mean - 1) * week.context_multiplier.numpy() ** -1.5  # (B, n)
    np.testing.assert_allclose(
        panel.panels[0].context_units.numpy(), week.context_units.numpy() * own, rtol=1e-10
    )
    # a product with one unit a line (mean 1) never stocks up; a cut sells more per line
    one = UnitsPerLine(np.ones(2), elasticity=-1.5)
    assert one.at(torch.tensor([-0.5, 0.5], dtype=torch.float64)).tolist() == [1.0, 1.0]
    two = UnitsPerLine(np.full(2, 2.0), elasticity=-1.5)
    cut, rise = two.at(torch.tensor([np.log(0.5), np.log(1.2)], dtype=torch.float64)).tolist()
    assert cut == pytest.approx(1 + 0.5**-1.5) and rise == pytest.approx(1 + 1.2**-1.5)
