"""The service's answers and its checks of requests (no web code here)."""

import datetime as dt

import numpy as np
import pytest

from retailsim_core.datasets.shelf import SHELF_FEATURES
from retailsim_core.serving.service import Context, RequestError


@pytest.fixture(scope="module")
def context(tiny_service):
    row = tiny_service.data.sample_contexts(1, seed=3, new_share=0.0).row(0)
    return Context(*row)


def test_recommendations_are_ranked_products_of_the_vocabulary(tiny_service, context):
    (answer,) = tiny_service.recommend([context], 10)
    assert len(answer["products"]) == 10 == len(set(answer["products"]))
    assert set(answer["products"]) <= set(tiny_service.vocab.products)
    assert answer["scores"] == sorted(answer["scores"], reverse=True)
    assert 0 < sum(answer["scores"]) <= 1 + 1e-9
    assert answer["cold_start"] is False


def test_a_new_customer_is_answered_and_marked(tiny_service, context):
    new = Context(None, context.store_id, context.date, context.hour)
    (answer,) = tiny_service.recommend([new], 5)
    assert answer["cold_start"] is True and len(answer["products"]) == 5


def test_a_batch_answers_each_context_as_alone(tiny_service):
    frame = tiny_service.data.sample_contexts(12, seed=5)
    contexts = [Context(*r) for r in frame.iter_rows()]
    together = tiny_service.recommend(contexts, 8)
    alone = [tiny_service.recommend([c], 8)[0] for c in contexts[:3]]
    for a, b in zip(together[:3], alone, strict=True):
        assert a["products"] == b["products"]
        np.testing.assert_allclose(a["scores"], b["scores"], rtol=1e-5)


@pytest.mark.parametrize(
    ("change", "field", "status"),
    [
        ({"customer_id": "CUST9999999999"}, "requests[0].customer_id", 404),
        ({"store_id": "STORE99999"}, "requests[0].store_id", 404),
        ({"date": dt.date(2001, 1, 1)}, "requests[0].date", 422),
        ({"date": dt.date(2030, 1, 1)}, "requests[0].date", 422),
    ],
)
def test_bad_contexts_name_their_field(tiny_service, context, change, field, status):
    bad = Context(**(context.__dict__ | change))
    with pytest.raises(RequestError) as err:
        tiny_service.recommend([bad], 5)
    assert (err.value.field, err.value.status) == (field, status)


def test_simulation_is_seeded(tiny_service, context):
    a = tiny_service.simulate(context, 20, seed=7)
    assert a == tiny_service.simulate(context, 20, seed=7)
    assert a != tiny_service.simulate(context, 20, seed=8)
    assert all(len(b) == len(set(b)) >= 1 for b in a)
    assert set().union(*a) <= set(tiny_service.vocab.products)


def test_counterfactual_prices_reach_the_model_as_log_multipliers(
    tiny_service, context, monkeypatch
):
    import retailsim_core.serving.service as service_module

    seen = {}

    def spy(model, batch, book, **kwargs):
        seen.update(kwargs)
        return [[1]]

    monkeypatch.setattr(service_module, "generate", spy)
    product = tiny_service.vocab.products[4]
    tiny_service.simulate(context, 1, seed=0, price_multipliers={product: 0.5})
    log_m = seen["log_multiplier"]
    token = int(tiny_service.tokens_of([product], "p")[0])
    assert float(log_m[token]) == pytest.approx(np.log(0.5))
    assert int((log_m != 0).sum()) == 1


def test_an_unknown_product_price_is_refused(tiny_service, context):
    with pytest.raises(RequestError) as err:
        tiny_service.simulate(context, 2, seed=0, price_multipliers={"NOPE": 0.9})
    assert err.value.field == "price_multipliers"


def _on_shelf(service, context) -> np.ndarray:
    batch = service.data.batch(service.contexts_frame([context], "context."))
    return batch["shelf"][0, 1:, SHELF_FEATURES.index("available")].numpy() > 0  # (V - 1,)


def test_elasticities_cover_own_and_cross_pairs(tiny_service, context):
    on = _on_shelf(tiny_service, context)
    products = [p for p, sold in zip(tiny_service.vocab.products, on, strict=False) if sold][:6]
    table = tiny_service.elasticities(context, products)
    own = table.filter(table["kind"] == "own")
    assert sorted(own["product_id"].to_list()) == sorted(products)
    assert (own["product_id"] == own["other_id"]).all()
    assert table["elasticity"].is_finite().all()
    assert set(table["kind"]) <= {"own", "same_category", "top_cross"}


def test_a_product_off_the_shelf_has_no_elasticity(tiny_service, context):
    """Not sold at the store that week: not defined, so 404 rather than a silent 0.0 (D82)."""
    on = _on_shelf(tiny_service, context)
    names = tiny_service.vocab.products
    sold, unsold = names[int(np.argmax(on))], names[int(np.argmin(on))]
    assert not on.all()
    with pytest.raises(RequestError, match="not on the shelf") as err:
        tiny_service.elasticities(context, [sold, unsold])
    assert err.value.status == 404 and err.value.field == "product_ids[1]"


def test_info_names_the_checkpoint_and_its_weeks(tiny_service):
    info = tiny_service.info()
    assert info["checkpoint_id"] == tiny_service.checkpoint_id and len(info["checkpoint_id"]) == 16
    assert info["training_weeks"] == [1, 8] and info["validation_weeks"] == [9, 11]
    assert info["served_dates"][0] == "2006-06-26"  # Monday of week 12
    assert info["scoring"] == "pytorch"
