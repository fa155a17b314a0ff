/* One week of derived prices over slot-aligned arrays: the compiled path of
 * retailsim_core/prices/kernel.py (D50).
 *
 * It performs the steps of kernel.fold_week_numpy (the tested reference) in the same
 * order of floating-point operations, but as four loops instead of ~60 NumPy passes, so the
 * results are bitwise equal (tested). Build it WITHOUT -ffast-math and with
 * -ffp-contract=off: NaN tests, fmax's NaN rule and unfused a*b - c are part of the contract.
 *
 * Glossary: n cells to date (slots 0..n-1); stride = the capacity of the per-slot arrays and
 * the row stride of the (H, stride) ring of observed prices and of the 3 rows of last prices
 * (BASE_WINDOW - 1, asserted in Python); k observations this week; P products; Z pricing zones;
 * R product x region pairs.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

enum { PRICE_NONPOSITIVE = 1, PRICE_OVER_MAX = 2, DEPTH_OVER_MAX = 4, BASE_PRICE_DECREASE = 8,
       LOW_COVERAGE = 16, HIGH_VOLATILITY = 32 };   /* prices.VALIDATION_FLAG_BITS (asserted) */

/* Every field is 8 bytes wide: the layout matches the ctypes.Structure without padding rules. */
typedef struct {
    int64_t n, stride, k, week, n_products;
    int64_t this_row, own_leave_row, l2_leave_row, new_head, n_own_rows;
    int64_t min_own;
    double promo_threshold, max_price, max_depth, max_missing_share, max_cv;
    const int64_t *own_rows;                                      /* ring rows of the reference window */
    /* observations (k) */
    const int64_t *obs_slot; const double *obs_price; const uint32_t *obs_lines; const int64_t *obs_units;
    const double *regular;            /* (n) the source's regular shelf price by slot; NaN: none (D90) */
    /* per-slot state (n), updated in place */
    double *history, *prev_price, *prev_base, *price_sum, *price_sumsq;
    int32_t *own_n, *l2_n; int64_t *l2_sum; int32_t *n_obs;
    const int16_t *first_week; const int64_t *product, *zone, *product_region;
    /* per product (P), zone (Z), product x region (R) */
    const int16_t *product_first_week; const int32_t *product_obs_weeks; const double *l3;
    double *l4_sum, *l4_count, *zone_max;                         /* scratch: 0, 0, NaN on entry */
    /* outputs (n) */
    double *actual, *base, *reference, *depth, *base_depth, *quality, *observed_price, *missing_share, *cv;
    double *price_sum_out, *price_sumsq_out;
    uint8_t *promo, *flags, *method;
    int16_t *first_week_out, *product_first_week_out;
    int32_t *n_obs_out, *product_obs_weeks_out;
    uint32_t *lines; int64_t *units;
} PriceWeek;

/* numpy.fmax: the non-NaN operand. Written out because libm's fmax is a call per element that
 * gcc inlines only under -ffinite-math-only; this form vectorises as a compare and a blend. */
static inline double fmax_(double a, double b) { return (a >= b || isnan(b)) ? a : b; }

/* numpy.clip on float64: NaN propagates. */
static inline double clip01(double x) {
    double t = isnan(x) ? x : (x > 0.0 ? x : 0.0);
    return isnan(t) ? t : (t < 1.0 ? t : 1.0);
}

static inline int64_t micro(double price) { return (int64_t)rint(price * 1e6); }

/* 1. The ring: week W's row replaces week W-H; each window loses the week that leaves it.
 * Branch-free so that it vectorises; the leaving rows are read before this week's is reset
 * (with the default windows the reference window's leaving row is this week's row). */
static void leave(const PriceWeek *w) {
    const double *restrict own_leaving = w->history + w->own_leave_row * w->stride;
    const double *restrict l2_leaving = w->history + w->l2_leave_row * w->stride;
    int32_t *restrict own_n = w->own_n, *restrict l2_n = w->l2_n;
    int64_t *restrict l2_sum = w->l2_sum;
    const int64_t n = w->n;
#pragma GCC ivdep
    for (int64_t i = 0; i < n; i++) {
        double own = own_leaving[i], l2 = l2_leaving[i];
        own_n[i] -= !isnan(own);
        l2_n[i] -= !isnan(l2);
        l2_sum[i] -= isnan(l2) ? 0 : micro(l2);
    }
    double *row = w->history + w->this_row * w->stride;
    for (int64_t i = 0; i < n; i++) row[i] = NAN;
    memset(w->lines, 0, (size_t)w->n * sizeof *w->lines);
    memset(w->units, 0, (size_t)w->n * sizeof *w->units);
}

/* 2. This week's observations (slots are distinct). */
static void observe(const PriceWeek *w) {
    double *row = w->history + w->this_row * w->stride;
    for (int64_t j = 0; j < w->k; j++) {
        int64_t s = w->obs_slot[j];
        double p = w->obs_price[j];
        w->n_obs[s] += 1; w->price_sum[s] += p; w->price_sumsq[s] += p * p;
        row[s] = p;
        w->own_n[s] += 1; w->l2_n[s] += 1; w->l2_sum[s] += micro(p);
        w->lines[s] = w->obs_lines[j]; w->units[s] = w->obs_units[j];
    }
}

/* 3. Per cell, the maximum observed price in the reference window (kept in `reference` until
 * pass 4 reads it); per zone the maximum of those; per product the running sums (in slot
 * order, as numpy.bincount adds them). */
static void window_maxima(const PriceWeek *w) {
    enum { BLOCK = 1024 };   /* cells per block: the block's maxima stay in L1 across the rows */
    for (int64_t lo = 0; lo < w->n; lo += BLOCK) {
        int64_t hi = lo + BLOCK < w->n ? lo + BLOCK : w->n;
        double *own = w->reference;
        for (int64_t i = lo; i < hi; i++) own[i] = NAN;
        for (int64_t r = 0; r < w->n_own_rows; r++) {
            const double *row = w->history + w->own_rows[r] * w->stride;
            for (int64_t i = lo; i < hi; i++) own[i] = fmax_(own[i], row[i]);
        }
        for (int64_t i = lo; i < hi; i++) {
            int64_t z = w->zone[i], p = w->product[i];
            w->zone_max[z] = fmax_(w->zone_max[z], own[i]);
            w->l4_sum[p] += w->price_sum[i];
            w->l4_count[p] += (double)w->n_obs[i];
        }
    }
}

/* 4. The waterfall, base price, reference, depths, rules, quality and the carried state: one
 * branch-free loop (selects, not jumps) so that it vectorises, with the per-product terms
 * (chain-wide mean, share of weeks without sales) computed once per product first. */
static void cells(const PriceWeek *w) {
    double *restrict l4 = w->l4_sum, *restrict missing_of = w->l4_count;   /* reused in place */
    for (int64_t p = 0; p < w->n_products; p++) {
        l4[p] = w->l4_sum[p] / w->l4_count[p];
        missing_of[p] = 1.0 - (double)w->product_obs_weeks[p]
                              / (double)(int16_t)(w->week - w->product_first_week[p] + 1);
    }
    const double *restrict row = w->history + w->this_row * w->stride;
    double *restrict prev0 = w->prev_price, *restrict prev1 = prev0 + w->stride, *restrict prev2 = prev1 + w->stride;
    double *restrict head = w->prev_price + w->new_head * w->stride;
    const int64_t *restrict product = w->product, *restrict zone = w->zone, *restrict region = w->product_region;
    const int64_t *restrict l2_sum = w->l2_sum;
    const int32_t *restrict l2_n = w->l2_n, *restrict own_n = w->own_n;
    const int32_t *restrict n_obs = w->n_obs;
    const uint32_t *restrict lines = w->lines;
    const double *restrict l3 = w->l3, *restrict zone_max = w->zone_max, *restrict sum = w->price_sum;
    const double *restrict sumsq = w->price_sumsq, *restrict regular = w->regular;
    double *restrict prev_base = w->prev_base, *restrict actual = w->actual, *restrict base = w->base;
    double *restrict reference = w->reference, *restrict depth = w->depth, *restrict base_depth = w->base_depth;
    double *restrict quality = w->quality, *restrict observed_price = w->observed_price;
    double *restrict missing_share = w->missing_share, *restrict cvs = w->cv;
    uint8_t *restrict promo = w->promo, *restrict flags = w->flags, *restrict method = w->method;
    const int64_t min_own = w->min_own;
    const double promo_threshold = w->promo_threshold, max_price = w->max_price, max_depth = w->max_depth;
    const double max_missing = w->max_missing_share, max_cv = w->max_cv;
    enum { BLOCK = 512 };   /* gathered per-product/zone/region terms of a block stay in L1 */
    double g_l3[BLOCK], g_l4[BLOCK], g_zone[BLOCK], g_missing[BLOCK];
    for (int64_t lo = 0; lo < w->n; lo += BLOCK) {
      const int64_t m_block = lo + BLOCK < w->n ? BLOCK : w->n - lo;
      /* Gathers first, unconditionally: gcc cannot vectorise a gather under a select. */
      for (int64_t j = 0; j < m_block; j++) {
        g_l3[j] = l3[region[lo + j]]; g_l4[j] = l4[product[lo + j]];
        g_zone[j] = zone_max[zone[lo + j]]; g_missing[j] = missing_of[product[lo + j]];
      }
#pragma GCC ivdep   /* the outputs and the state are distinct arrays */
      for (int64_t j = 0; j < m_block; j++) {
        const int64_t i = lo + j;
        double p = row[i];
        int observed = !isnan(p);
        double l2 = (double)l2_sum[i] / ((double)l2_n[i] * 1e6);
        double l3v = g_l3[j], l4v = g_l4[j];
        int has_l2 = !isnan(l2), has_l3 = !isnan(l3v);
        /* The waterfall from the last level up, as two-way selects (gcc 12 if-converts no
         * select of more than four ways). */
        double a = has_l3 ? l3v : l4v, q = has_l3 ? 0.45 : 0.3;          /* q: BASE_QUALITY */
        int m = has_l3 ? 2 : 3;
        a = has_l2 ? l2 : a; q = has_l2 ? 0.6 : q; m = has_l2 ? 1 : m;
        a = observed ? p : a; q = observed ? 0.85 : q; m = observed ? 0 : m;
        q = lines[i] >= 3 ? 1.0 : q;
        double b = fmax_(fmax_(fmax_(prev0[i], prev1[i]), prev2[i]), a);   /* numpy: reduce rows, then actual */
        double own = reference[i];
        double ref = own_n[i] >= min_own ? own : fmax_(own, g_zone[j]);
        ref = isnan(regular[i]) ? ref : regular[i];
        double d = observed ? clip01(1.0 - p / ref) : 0.0;
        int32_t count = n_obs[i];
        double mean = sum[i] / (double)count;
        double var = (sumsq[i] - (double)count * mean * mean) / (double)(count - 1);
        double cv = count >= 2 ? sqrt(isnan(var) || var > 0.0 ? var : 0.0) / mean : NAN;
        double missing = g_missing[j];
        double pb = prev_base[i];
        int r0 = a <= 0.0, r1 = a >= max_price, r2 = d >= max_depth, r3 = b < pb - 0.005;
        int r4 = missing > max_missing, r5 = cv > max_cv;
        actual[i] = a; base[i] = b; reference[i] = ref; depth[i] = d;
        base_depth[i] = clip01(1.0 - a / b); promo[i] = d > promo_threshold;
        quality[i] = clip01(q - 0.1 * (double)(r0 + r1 + r2 + r3 + r4 + r5));   /* 0.1 x rules broken */
        flags[i] = (uint8_t)(r0 * PRICE_NONPOSITIVE | r1 * PRICE_OVER_MAX | r2 * DEPTH_OVER_MAX
                             | r3 * BASE_PRICE_DECREASE | r4 * LOW_COVERAGE | r5 * HIGH_VOLATILITY);
        method[i] = (uint8_t)m; observed_price[i] = p; missing_share[i] = missing; cvs[i] = cv;
        prev_base[i] = b;
        head[i] = a;                   /* the oldest last-price row becomes week W's */
      }
    }
    for (int64_t i = 0; i < w->n; i++) {
        w->product_first_week_out[i] = w->product_first_week[product[i]];
        w->product_obs_weeks_out[i] = w->product_obs_weeks[product[i]];
    }
    memcpy(w->first_week_out, w->first_week, (size_t)w->n * sizeof *w->first_week);
    memcpy(w->n_obs_out, w->n_obs, (size_t)w->n * sizeof *w->n_obs);
    memcpy(w->price_sum_out, w->price_sum, (size_t)w->n * sizeof *w->price_sum);
    memcpy(w->price_sumsq_out, w->price_sumsq, (size_t)w->n * sizeof *w->price_sumsq);
}

int64_t rs_price_week_struct_size(void) { return (int64_t)sizeof(PriceWeek); }

void rs_price_week(const PriceWeek *w) {
    leave(w);
    observe(w);
    window_maxima(w);
    cells(w);
}
