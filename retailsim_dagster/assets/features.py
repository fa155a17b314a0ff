"""Feature engineering (design §3): pseudo_brands, store_features (price features are read with
the shelf, D96)."""

import dagster as dg
import polars as pl

from retailsim_core.features.brand_agreement import brand_agreement
from retailsim_core.features.brands import PSEUDO_BRANDS_SCHEMA
from retailsim_core.features.feature_tables import STORE_FEATURES_SCHEMA
from retailsim_core.graph.product_embeddings import nearest_neighbours, train_embeddings
from retailsim_core.ingest.completejourney_source import manufacturers
from retailsim_core.models.gnn.graphsage import GraphSAGEConfig
from retailsim_core.pipeline.data.embeddings import all_products, write_embeddings
from retailsim_core.pipeline.data.feature_weeks import (
    build_pseudo_brands,
    store_feature_weeks,
)
from retailsim_core.pipeline.data.graph_tables import load_graph
from retailsim_core.tables import (
    BRANDS_TABLE,
    EMBEDDINGS_TABLE,
    PRICES_TABLE,
    PRODUCT_GRAPH_TABLE,
    RAW_TABLE,
    STORE_FEATURES_TABLE,
)
from retailsim_dagster.metadata import markdown_table, table_schema
from retailsim_dagster.partitions import (
    CRITICAL_PATH,
    previous_weeks,
    weekly_partitions,
    weeks_of,
)
from retailsim_dagster.resources import (
    PipelineConfigResource,
    RawSourceResource,
    WarehouseResource,
)


@dg.asset(
    group_name="features",
    kinds={"polars", "parquet"},
    deps=[RAW_TABLE, PRICES_TABLE, PRODUCT_GRAPH_TABLE],
    op_tags=CRITICAL_PATH,
    backfill_policy=dg.BackfillPolicy.single_run(),
    metadata={"dagster/column_schema": table_schema(PSEUDO_BRANDS_SCHEMA)},
    description="Pseudo-brand per product: sub-commodity x price tier x substitution cluster "
    "(design §3.2).",
)
def pseudo_brands(
    warehouse: WarehouseResource, pipeline_config: PipelineConfigResource
) -> dg.MaterializeResult:
    brands = build_pseudo_brands(warehouse.warehouse, pipeline_config.split)
    warehouse.warehouse.write_table(BRANDS_TABLE, brands)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": brands.height,
            BRANDS_TABLE: brands["pseudo_brand_id"].n_unique(),
            "substitution_groups": brands["substitution_group"].drop_nulls().n_unique(),
            "tiers": dg.MetadataValue.md(
                markdown_table(brands.group_by("price_tier").len("products").sort("price_tier"))
            ),
        }
    )


@dg.asset(
    group_name="features",
    partitions_def=weekly_partitions,
    kinds={"polars", "parquet"},
    backfill_policy=dg.BackfillPolicy.single_run(),
    deps=[dg.AssetDep(RAW_TABLE, partition_mapping=previous_weeks(1))],
    metadata={"dagster/column_schema": table_schema(STORE_FEATURES_SCHEMA)},
    description="T5 store context as of week W from weeks < W, with format x region fallbacks "
    "(design §4.6).",
)
def store_features(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    summary = store_feature_weeks(warehouse.warehouse, weeks_of(context), log=context.log.info)
    return dg.MaterializeResult(
        metadata={
            "stores_last_week": int(summary["stores"][-1]),
            "per_week": dg.MetadataValue.md(markdown_table(summary)),
        }
    )


@dg.asset_check(
    asset=BRANDS_TABLE, description="tiers split each category about 20/60/20; ids are 0..K-1"
)
def pseudo_brand_tiers(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    b = warehouse.warehouse.read_table(BRANDS_TABLE)
    share = b.group_by("price_tier").len().with_columns(share=pl.col("len") / b.height)
    shares = dict(share.select("price_tier", "share").iter_rows())
    contiguous = sorted(b["pseudo_brand_id"].unique().to_list()) == list(
        range(b["pseudo_brand_id"].n_unique())
    )
    ok = contiguous and abs(shares.get("mid", 0) - 0.6) < 0.1
    return dg.AssetCheckResult(
        passed=ok,
        metadata={
            **{f"share_{k}": v for k, v in shares.items()},
            "ids_contiguous": contiguous,
            "expected_mid_share": 0.6,
        },
    )


@dg.asset_check(
    asset=BRANDS_TABLE,
    description="pseudo-brands against the source's manufacturers (ARI, NMI) and price tiers "
    "against National / Private brands, where the source has them (The Complete Journey)",
)
def pseudo_brands_vs_manufacturers(
    warehouse: WarehouseResource, raw_source: RawSourceResource
) -> dg.AssetCheckResult:
    makers = manufacturers(raw_source.path) if raw_source.source == "completejourney" else None
    if makers is None:
        return dg.AssetCheckResult(passed=True, metadata={"note": "the source names no makers"})
    got = brand_agreement(warehouse.warehouse.read_table(BRANDS_TABLE), makers)
    pseudo, by_type = got["pseudo_brand_vs_manufacturer"], got["product_type_vs_manufacturer"]
    tiers = got["private_share_by_tier"]
    return dg.AssetCheckResult(
        # Informational: agreement is reported, and a tier order that puts private labels in
        # the dearer tiers would mean the tiers do not measure price position.
        passed=tiers.get("value", {}).get("private", 0)
        >= tiers.get("premium", {}).get("private", 0),
        metadata={
            "products": got["products"],
            "manufacturers": got["manufacturers"],
            "pseudo_brand_ari": pseudo["ari"],
            "pseudo_brand_nmi": pseudo["nmi"],
            "product_type_ari": by_type["ari"],
            "product_type_nmi": by_type["nmi"],
            **{f"private_share_{t}": v["private"] for t, v in tiers.items()},
        },
    )


@dg.asset_check(asset=STORE_FEATURES_TABLE, description="normalised features in [0, 1]")
def store_feature_ranges(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    cols = ["traffic", "size_proxy", "regional_competition", "age"]
    bad = (
        warehouse.warehouse.scan(STORE_FEATURES_TABLE)
        .select([(~pl.col(c).is_between(0, 1)).sum().alias(c) for c in cols])
        .collect()
        .row(0, named=True)
    )
    return dg.AssetCheckResult(
        passed=not any(bad.values()), metadata={f"out_of_range_{k}": int(v) for k, v in bad.items()}
    )


@dg.asset(
    group_name="features",
    kinds={"pytorch", "dgl", "safetensors"},
    deps=[PRODUCT_GRAPH_TABLE, BRANDS_TABLE, RAW_TABLE],
    op_tags=CRITICAL_PATH,
    backfill_policy=dg.BackfillPolicy.single_run(),
    description="256-d edge-type-aware GraphSAGE product embeddings, trained by link prediction "
    "(design §3.4); safetensors + Parquet id map.",
)
def graphsage_embeddings(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    pipeline_config: PipelineConfigResource,
) -> dg.MaterializeResult:
    wh = warehouse.warehouse
    brands = wh.read_table(BRANDS_TABLE)
    cfg = GraphSAGEConfig()
    products = all_products(wh, max_week=pipeline_config.split.valid_end)
    emb = train_embeddings(load_graph(wh), brands, products, cfg, log=context.log.info)
    write_embeddings(wh, emb, cfg)
    probes = brands.filter(pl.col("competitive_intensity") > 0)["product_id"].head(5).to_list()
    curve = pl.DataFrame({"epoch": range(1, len(emb.losses) + 1), "loss": emb.losses}).gather_every(
        max(len(emb.losses) // 12, 1)
    )
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": emb.vectors.shape[0],
            "dimensions": emb.vectors.shape[1],
            "final_loss": emb.losses[-1],
            "training_seconds": round(emb.seconds, 1),
            "loss_curve": dg.MetadataValue.path(
                str(wh.table_dir(EMBEDDINGS_TABLE) / "loss_curve.svg")
            ),
            "loss_by_epoch": dg.MetadataValue.md(markdown_table(curve)),
            "sources": dg.MetadataValue.md(
                markdown_table(emb.id_map.group_by("source").len("products").sort("source"))
            ),
            "nearest_neighbours": dg.MetadataValue.md(
                markdown_table(nearest_neighbours(emb.vectors, emb.id_map, probes))
            ),
        }
    )
