"""The dunnhumby *Let's Get Sort-of-Real* (LGSR) file format, and RetailSim's raw table schema.

Facts read off real LGSR files; the ingestion accepts exactly these and the synthetic
generator writes exactly these.
"""

from __future__ import annotations

import polars as pl

#: Header of the full dataset, in file order.
FULL_HEADER: tuple[str, ...] = (
    "SHOP_WEEK",
    "SHOP_DATE",
    "SHOP_WEEKDAY",
    "SHOP_HOUR",
    "QUANTITY",
    "SPEND",
    "PROD_CODE",
    "PROD_CODE_10",
    "PROD_CODE_20",
    "PROD_CODE_30",
    "PROD_CODE_40",
    "CUST_CODE",
    "CUST_PRICE_SENSITIVITY",
    "CUST_LIFESTAGE",
    "BASKET_ID",
    "BASKET_SIZE",
    "BASKET_PRICE_SENSITIVITY",
    "BASKET_TYPE",
    "BASKET_DOMINANT_MISSION",
    "STORE_CODE",
    "STORE_FORMAT",
    "STORE_REGION",
)
#: The public 5,000-customer sample names the two customer segments seg_1 / seg_2.
SAMPLE_HEADER: tuple[str, ...] = tuple(
    {"CUST_PRICE_SENSITIVITY": "seg_1", "CUST_LIFESTAGE": "seg_2"}.get(c, c) for c in FULL_HEADER
)
HEADERS = {"full": FULL_HEADER, "sample": SAMPLE_HEADER}

#: Sample-file segment codes -> full-dataset codes.
SEG_1_TO_PRICE_SENSITIVITY = {"AZ": "LA", "BG": "UM", "CT": "MM", "DY": "XX"}
SEG_2_TO_LIFESTAGE = {"AT": "YA", "BU": "OT", "CZ": "OA", "DI": "YF", "EQ": "OF", "FN": "PE"}
PRICE_SENSITIVITY_TO_SEG_1 = {v: k for k, v in SEG_1_TO_PRICE_SENSITIVITY.items()}
LIFESTAGE_TO_SEG_2 = {v: k for k, v in SEG_2_TO_LIFESTAGE.items()}

# Closed code sets. LA = Less Affluent, MM = Mid Market, UM = Up Market (docs/decisions.md).
PRICE_SENSITIVITY_CODES = ("LA", "MM", "UM", "XX")
LIFESTAGE_CODES = ("YA", "OA", "YF", "OF", "PE", "OT", "XX")
BASKET_SIZE_CODES = ("S", "M", "L")
# Mission vocabularies, the one order every code, struct field and model head uses: types by
# basket size, foci alphabetical; "XX" (unknown) is always last.
MISSION_TYPES = ("Top Up", "Small Shop", "Full Shop")
MISSION_FOCI = ("Fresh", "Grocery", "Mixed", "Nonfood")
UNKNOWN_CODE = "XX"
BASKET_TYPE_CODES = (*MISSION_TYPES, UNKNOWN_CODE)
MISSION_CODES = (*MISSION_FOCI, UNKNOWN_CODE)
STORE_FORMAT_CODES = ("LS", "MS", "SS", "XLS")
STORE_REGION_CODES = tuple(f"{d}0{i}" for d in "ENSW" for i in (1, 2, 3))

#: Identifier patterns (anchored), ASCII digits only: `\d` matches any Unicode digit (D78).
#: BASKET_ID is a 15-digit integer in LGSR; any that fits Int64 (18 digits) is accepted.
ID_PATTERNS = {
    "PROD_CODE": r"^PRD[0-9]{7}$",
    "PROD_CODE_10": r"^CL[0-9]{5}$",
    "PROD_CODE_20": r"^DEP[0-9]{5}$",
    "PROD_CODE_30": r"^G[0-9]{5}$",
    "PROD_CODE_40": r"^D[0-9]{5}$",
    "CUST_CODE": r"^CUST[0-9]{10}$",
    "STORE_CODE": r"^STORE[0-9]{5}$",
    "BASKET_ID": r"^[0-9]{1,18}$",
}
CODE_SETS = {
    "CUST_PRICE_SENSITIVITY": PRICE_SENSITIVITY_CODES,
    "CUST_LIFESTAGE": LIFESTAGE_CODES,
    "BASKET_SIZE": BASKET_SIZE_CODES,
    "BASKET_PRICE_SENSITIVITY": PRICE_SENSITIVITY_CODES,
    "BASKET_TYPE": BASKET_TYPE_CODES,
    "BASKET_DOMINANT_MISSION": MISSION_CODES,
    "STORE_FORMAT": STORE_FORMAT_CODES,
    "STORE_REGION": STORE_REGION_CODES,
}
#: Columns that may be empty: uncarded shoppers have no customer code or segments,
#: and CUST_LIFESTAGE is sometimes empty for carded ones.
NULLABLE_COLUMNS = ("CUST_CODE", "CUST_PRICE_SENSITIVITY", "CUST_LIFESTAGE")
#: Every basket has exactly one value of each of these.
BASKET_LEVEL_COLUMNS = (
    "CUST_CODE",
    "SHOP_DATE",
    "SHOP_HOUR",
    "STORE_CODE",
    "BASKET_SIZE",
    "BASKET_PRICE_SENSITIVITY",
    "BASKET_TYPE",
    "BASKET_DOMINANT_MISSION",
)

#: LGSR column -> raw_transactions column. Identifiers take the spec's names.
RAW_COLUMN_NAMES = {
    "SHOP_WEEK": "shop_week",
    "SHOP_DATE": "shop_date",
    "SHOP_WEEKDAY": "shop_weekday",
    "SHOP_HOUR": "shop_hour",
    "QUANTITY": "quantity",
    "SPEND": "spend",
    "PROD_CODE": "product_id",
    "PROD_CODE_10": "prod_code_10",
    "PROD_CODE_20": "prod_code_20",
    "PROD_CODE_30": "prod_code_30",
    "PROD_CODE_40": "prod_code_40",
    "CUST_CODE": "customer_id",
    "CUST_PRICE_SENSITIVITY": "cust_price_sensitivity",
    "CUST_LIFESTAGE": "cust_lifestage",
    "BASKET_ID": "basket_id",
    "BASKET_SIZE": "basket_size",
    "BASKET_PRICE_SENSITIVITY": "basket_price_sensitivity",
    "BASKET_TYPE": "basket_type",
    "BASKET_DOMINANT_MISSION": "basket_dominant_mission",
    "STORE_CODE": "store_id",
    "STORE_FORMAT": "store_format",
    "STORE_REGION": "store_region",
}

RAW_TRANSACTIONS_SCHEMA = pl.Schema(
    {
        "week": pl.Int16,  # 1..117
        "shop_week": pl.Int32,  # LGSR SHOP_WEEK, e.g. 200607
        "shop_date": pl.Date,
        "shop_weekday": pl.Int8,  # 1 = Sunday .. 7 = Saturday
        "shop_hour": pl.Int8,
        "quantity": pl.Int32,
        "spend": pl.Float64,
        # What the line cost at the shelf's regular price (spend plus the retailer's discounts):
        # null where the source does not record discounts (LGSR); derived prices then infer it.
        "regular_spend": pl.Float64,
        "product_id": pl.String,
        "prod_code_10": pl.String,
        "prod_code_20": pl.String,
        "prod_code_30": pl.String,
        "prod_code_40": pl.String,
        "customer_id": pl.String,  # null for uncarded shoppers
        "cust_price_sensitivity": pl.String,
        "cust_lifestage": pl.String,
        "basket_id": pl.Int64,
        "basket_size": pl.String,
        "basket_price_sensitivity": pl.String,
        "basket_type": pl.String,
        "basket_dominant_mission": pl.String,
        "store_id": pl.String,
        "store_format": pl.String,
        "store_region": pl.String,
    }
)

#: Quarantined rows keep the file's text verbatim (full-header names), plus why and where.
QUARANTINE_SCHEMA = pl.Schema(
    {"week": pl.Int16, "source_file": pl.String, "record_number": pl.Int64, "reason": pl.String}
    | {c: pl.String for c in FULL_HEADER}
)
