"""The pseudo-brand check against a source's manufacturers: reported where the source names
them (The Complete Journey), a note where it does not (LGSR)."""

import polars as pl

from retailsim_core.features.brands import PSEUDO_BRANDS_SCHEMA
from retailsim_core.ingest.completejourney import PRODUCTS_SCHEMA
from retailsim_dagster.assets.features import pseudo_brands_vs_manufacturers
from retailsim_dagster.resources import RawSourceResource, WarehouseResource


def _world(tmp_path):
    products = [
        (1, 10, "GROCERY", "National", "SOUP", "SOUP: CANNED", None),
        (2, 10, "GROCERY", "National", "SOUP", "SOUP: CANNED", None),
        (3, 11, "GROCERY", "Private", "SOUP", "SOUP: CANNED", None),
        (4, 11, "GROCERY", "Private", "SOUP", "SOUP: CANNED", None),
    ]
    (tmp_path / "raw").mkdir()
    pl.DataFrame(products, schema=PRODUCTS_SCHEMA, orient="row").write_parquet(
        tmp_path / "raw" / "products.parquet"
    )
    warehouse = WarehouseResource(root=str(tmp_path / "wh"))
    brands = pl.DataFrame(
        {
            "product_id": [f"PRD000000{i}" for i in range(1, 5)],
            "prod_code_10": ["SOUP: CANNED"] * 4,
            "pseudo_brand_id": [0, 0, 1, 1],
            "price_tier": ["premium", "premium", "value", "value"],
        }
    )
    brands = pl.DataFrame(
        {c: brands[c] if c in brands.columns else None for c in PSEUDO_BRANDS_SCHEMA},
        schema=PSEUDO_BRANDS_SCHEMA,
    )
    warehouse.warehouse.write_table("pseudo_brands", brands)
    return warehouse, RawSourceResource(raw_dir=str(tmp_path / "raw"))


def test_pseudo_brands_are_scored_against_the_manufacturers(tmp_path, monkeypatch):
    monkeypatch.setenv("RETAILSIM_SOURCE", "completejourney")
    warehouse, raw = _world(tmp_path)
    result = pseudo_brands_vs_manufacturers(warehouse=warehouse, raw_source=raw)
    meta = {k: v.value for k, v in result.metadata.items()}
    assert result.passed and meta["pseudo_brand_ari"] == 1.0 and meta["product_type_ari"] == 0.0
    assert meta["private_share_value"] == 1.0 and meta["private_share_premium"] == 0.0


def test_a_source_without_manufacturers_gets_a_note(tmp_path, monkeypatch):
    monkeypatch.delenv("RETAILSIM_SOURCE", raising=False)
    warehouse, raw = _world(tmp_path)
    result = pseudo_brands_vs_manufacturers(warehouse=warehouse, raw_source=raw)
    assert result.passed and "no makers" in result.metadata["note"].value
