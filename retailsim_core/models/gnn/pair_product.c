/* Elementwise products of gathered node-pair rows and their backward: the compiled path of
 * GraphSAGE's link scores (retailsim_core/models/pair_product.py, D104).
 *
 * forward:  out[i, :] = unit[src[i], :] * unit[dst[i], :]
 * backward: g_dst[dst[i], :] += grad[i, :] * unit[src[i], :]
 *           g_src[src[i], :] += grad[i, :] * unit[dst[i], :]     for i = 0, 1, ..., E-1
 *
 * The same products and sums in the same order as PyTorch's index_select, mul and their
 * backward (a deterministic index_add adds a row's contributions in the order of i, from
 * zeros), so results are bitwise equal (tested); nothing (E, H) is materialised but the
 * output. Build WITHOUT -ffast-math and with -ffp-contract=off: a fused multiply-add would
 * round once where PyTorch rounds twice.
 *
 * Threads split the forward by pairs and the backward by column blocks, so every element's
 * sum runs over i in one order whatever the thread count.
 *
 * Glossary: E pairs; H row width; unit (N, H) row-major; grad (E, H) with strides
 * (grad_row, grad_col) in elements (the score's sum hands over an expanded (E, 1) column).
 */
#include <stdint.h>

void rs_pair_product(const float *unit, const int64_t *src, const int64_t *dst, float *out,
                     int64_t e, int64_t h, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < e; i++) {
        const float *restrict a = unit + src[i] * h, *restrict b = unit + dst[i] * h;
        float *restrict o = out + i * h;
        for (int64_t k = 0; k < h; k++) o[k] = a[k] * b[k];
    }
}

/* out[i] = sum_k unit[src[i], k] * unit[dst[i], k], added in the order of PyTorch's sum over a
 * contiguous last dimension of `lanes`-wide vectors (its CPU kernel's vectorised inner sum): per
 * lane, four interleaved accumulators over the row's vectors from zeros, then the leftover
 * vectors into the first, the four added in order, a scalar tail of the row from zero, and the
 * lanes added to it one by one. Valid while a row holds fewer than 64 vectors (beyond, PyTorch
 * cascades its accumulators); pair_product.py checks the bytes against torch.sum before use. */
void rs_pair_dot(const float *unit, const int64_t *src, const int64_t *dst, float *out,
                 int64_t e, int64_t h, int64_t lanes, int threads) {
    enum { ILP = 4, MAX_LANES = 16 };
    const int64_t vectors = h / lanes, rounds = vectors / ILP;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < e; i++) {
        const float *restrict a = unit + src[i] * h, *restrict b = unit + dst[i] * h;
        float acc[ILP][MAX_LANES];
        for (int k = 0; k < ILP; k++)
            for (int64_t l = 0; l < lanes; l++) acc[k][l] = 0.0f;
        for (int64_t r = 0; r < rounds; r++)
            for (int k = 0; k < ILP; k++) {
                const int64_t base = (r * ILP + k) * lanes;
                for (int64_t l = 0; l < lanes; l++) acc[k][l] += a[base + l] * b[base + l];
            }
        for (int k = 0; k < ILP; k++)          /* the cascade's three empty levels */
            for (int64_t l = 0; l < lanes; l++) acc[k][l] = ((acc[k][l] + 0.0f) + 0.0f) + 0.0f;
        for (int64_t v = rounds * ILP; v < vectors; v++)
            for (int64_t l = 0; l < lanes; l++) acc[0][l] += a[v * lanes + l] * b[v * lanes + l];
        for (int k = 1; k < ILP; k++)
            for (int64_t l = 0; l < lanes; l++) acc[0][l] += acc[k][l];
        float total = 0.0f;
        for (int64_t k = vectors * lanes; k < h; k++) total += a[k] * b[k];
        for (int64_t l = 0; l < lanes; l++) total += acc[0][l];
        out[i] = 0.0f + total;             /* the output is zero-filled, then accumulated into */
    }
}

void rs_pair_product_backward(const float *unit, const int64_t *src, const int64_t *dst,
                              const float *grad, int64_t grad_row, int64_t grad_col,
                              float *g_src, float *g_dst, int64_t e, int64_t h, int threads) {
    enum { BLOCK = 64 };   /* columns per work unit: a row's block is four cache lines */
    const int64_t blocks = (h + BLOCK - 1) / BLOCK;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t blk = 0; blk < blocks; blk++) {
        const int64_t lo = blk * BLOCK, hi = lo + BLOCK < h ? lo + BLOCK : h;
        for (int64_t i = 0; i < e; i++) {
            const float *restrict a = unit + src[i] * h, *restrict b = unit + dst[i] * h;
            const float *restrict g = grad + i * grad_row;
            float *restrict gs = g_src + src[i] * h, *restrict gd = g_dst + dst[i] * h;
            if (grad_col == 0) {
                const float gi = g[0];
                for (int64_t k = lo; k < hi; k++) { gd[k] += gi * a[k]; gs[k] += gi * b[k]; }
            } else {
                for (int64_t k = lo; k < hi; k++) {
                    const float gk = g[k * grad_col];
                    gd[k] += gk * a[k]; gs[k] += gk * b[k];
                }
            }
        }
    }
}
