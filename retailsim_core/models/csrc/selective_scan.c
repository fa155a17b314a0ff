/* Compiled CPU selective scan: forward and backward of
 *     h_t = exp(delta_t * A) * h_{t-1} + delta_t * x_t * B_t,   y_t = <C_t, h_t>
 * per channel e and state n (the D * x skip term is added by the caller).
 *
 * Why C: on a CPU a scan step is memory-bound when written as tensor ops (each op streams the
 * (B, E, N) state through memory); here the state of a block of channels stays in L1 and
 * every step is one fused, vectorised pass. Oracle: mamba.selective_scan_ref (tested).
 *
 * Layout (row-major, fp32): x, delta, y, dx, ddelta (B, L, E); A, dA_part rows (E, N);
 * Bm, Cm, dB, dC (B, L, N); starts (B, n_chunks, E, N) = state before each chunk.
 *
 * Inside a unit, blocks of EB channels advance together with the channel as the vector lane
 * (state layout [n][j]), so no step needs a horizontal sum over the state.
 *
 * Work splits into (batch row b, channel group g) units; G groups is a constant of the call,
 * not of the thread count, and every sum runs in a fixed order, so results are bitwise the
 * same for any number of threads. dB/dC sum over channels: each group writes its own slice of
 * dB_part/dC_part (G, B, L, N) and the caller sums the G slices; dA sums over the batch: each
 * row writes dA_part (B, E, N) and the caller sums over B.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EB 16       /* channels advanced together, one vector lane each: states (N x EB) stay in L1 */
#define MAX_N 256   /* largest d_state; the caller checks */

static void group_range(long E, long G, long g, long *e0, long *e1) {
    long per = (E + G - 1) / G;
    *e0 = g * per;
    *e1 = *e0 + per < E ? *e0 + per : E;
}

/* A block's A transposed to [n][j], zero-padded to EB lanes (padded lanes: decay 1, input 0). */
static void load_block_A(const float *A, float *At, long N, long e0, long eb) {
    memset(At, 0, sizeof(float) * N * EB);
    for (long j = 0; j < eb; ++j)
        for (long n = 0; n < N; ++n) At[n * EB + j] = A[(e0 + j) * N + n];
}

/* Channels [e0, e0+eb) of row b over steps [t0, t1) from state h ([n][j], N x EB), updated in
 * place. With hs == NULL writes y; otherwise keeps every state and decay in hs, das
 * ([t - t0][n][j]) and writes no output. */
static void block_forward(const float *x, const float *delta, const float *At, const float *Bm,
                          const float *Cm, float *y, float *hs, float *das, float *h,
                          long b, long L, long E, long N, long e0, long eb, long t0, long t1) {
    float dv[EB], dxv[EB], acc[EB];
    for (long t = t0; t < t1; ++t) {
        const float *bt = Bm + (b * L + t) * N, *ct = Cm + (b * L + t) * N;
        long row = (b * L + t) * E + e0;
        for (long j = 0; j < EB; ++j) {
            dv[j] = j < eb ? delta[row + j] : 0.f;
            dxv[j] = j < eb ? dv[j] * x[row + j] : 0.f;
            acc[j] = 0.f;
        }
        for (long n = 0; n < N; ++n) {
            float bn = bt[n], cn = ct[n];
            float *hn = h + n * EB;
            const float *an = At + n * EB;
            if (hs) {
                float *hsn = hs + ((t - t0) * N + n) * EB, *dan = das + ((t - t0) * N + n) * EB;
                #pragma omp simd
                for (long j = 0; j < EB; ++j) {
                    float da = expf(dv[j] * an[j]);
                    float hv = da * hn[j] + dxv[j] * bn;
                    hn[j] = hv;
                    hsn[j] = hv;
                    dan[j] = da;
                }
            } else {
                #pragma omp simd
                for (long j = 0; j < EB; ++j) {
                    float hv = expf(dv[j] * an[j]) * hn[j] + dxv[j] * bn;
                    hn[j] = hv;
                    acc[j] += cn * hv;
                }
            }
        }
        if (!hs)
            for (long j = 0; j < eb; ++j) y[row + j] = acc[j];
    }
}

/* starts keeps, per (row, chunk), each block's state as [n][j] with lane stride eb. */
static float *start_of(float *starts, long b, long c, long n_chunks, long E, long N, long e0) {
    return starts + ((b * n_chunks + c) * E + e0) * N;
}

void rs_scan_forward(const float *x, const float *delta, const float *A, const float *Bm,
                     const float *Cm, float *y, float *starts, long B, long L, long E, long N,
                     long chunk, long G, int threads) {
    long n_chunks = (L + chunk - 1) / chunk;
    #pragma omp parallel for num_threads(threads) collapse(2) schedule(dynamic, 1)
    for (long b = 0; b < B; ++b) {
        for (long g = 0; g < G; ++g) {
            long e0, e1;
            group_range(E, G, g, &e0, &e1);
            float h[MAX_N * EB], At[MAX_N * EB];
            for (long eb0 = e0; eb0 < e1; eb0 += EB) {
                long eb = e1 - eb0 < EB ? e1 - eb0 : EB;
                load_block_A(A, At, N, eb0, eb);
                memset(h, 0, sizeof(float) * N * EB);
                for (long c = 0; c < n_chunks; ++c) {
                    long t0 = c * chunk, t1 = t0 + chunk < L ? t0 + chunk : L;
                    if (starts) {
                        float *s = start_of(starts, b, c, n_chunks, E, N, eb0);
                        for (long n = 0; n < N; ++n)
                            for (long j = 0; j < eb; ++j) s[n * eb + j] = h[n * EB + j];
                    }
                    block_forward(x, delta, At, Bm, Cm, y, NULL, NULL, h, b, L, E, N, eb0, eb, t0, t1);
                }
            }
        }
    }
}

void rs_scan_backward(const float *x, const float *delta, const float *A, const float *Bm,
                      const float *Cm, float *starts, const float *dy, float *dx,
                      float *ddelta, float *dA_part, float *dB_part, float *dC_part,
                      long B, long L, long E, long N, long chunk, long G, int threads) {
    long n_chunks = (L + chunk - 1) / chunk;
    #pragma omp parallel for num_threads(threads) collapse(2) schedule(dynamic, 1)
    for (long b = 0; b < B; ++b) {
        for (long g = 0; g < G; ++g) {
            long e0, e1;
            group_range(E, G, g, &e0, &e1);
            float *hs = malloc(sizeof(float) * chunk * N * EB);
            float *das = malloc(sizeof(float) * chunk * N * EB);
            float h[MAX_N * EB], h0[MAX_N * EB], carry[MAX_N * EB], At[MAX_N * EB], dAt[MAX_N * EB];
            float dv[EB], xv[EB], dxv[EB], gy[EB], s_dA[EB], s_B[EB];
            float *dBg = dB_part + (g * B + b) * L * N, *dCg = dC_part + (g * B + b) * L * N;
            float *dAb = dA_part + b * E * N;
            memset(dBg, 0, sizeof(float) * L * N);
            memset(dCg, 0, sizeof(float) * L * N);
            for (long eb0 = e0; eb0 < e1; eb0 += EB) {
                long eb = e1 - eb0 < EB ? e1 - eb0 : EB;
                load_block_A(A, At, N, eb0, eb);
                memset(carry, 0, sizeof(float) * N * EB);
                memset(dAt, 0, sizeof(float) * N * EB);
                for (long c = n_chunks - 1; c >= 0; --c) {
                    long t0 = c * chunk, t1 = t0 + chunk < L ? t0 + chunk : L;
                    const float *s = start_of(starts, b, c, n_chunks, E, N, eb0);
                    memset(h0, 0, sizeof(float) * N * EB);
                    for (long n = 0; n < N; ++n)
                        for (long j = 0; j < eb; ++j) h0[n * EB + j] = s[n * eb + j];
                    memcpy(h, h0, sizeof(float) * N * EB);
                    block_forward(x, delta, At, Bm, Cm, NULL, hs, das, h, b, L, E, N, eb0, eb, t0, t1);
                    for (long t = t1 - 1; t >= t0; --t) {
                        const float *bt = Bm + (b * L + t) * N, *ct = Cm + (b * L + t) * N;
                        float *dbt = dBg + t * N, *dct = dCg + t * N;
                        long row = (b * L + t) * E + eb0;
                        for (long j = 0; j < EB; ++j) {
                            dv[j] = j < eb ? delta[row + j] : 0.f;
                            xv[j] = j < eb ? x[row + j] : 0.f;
                            gy[j] = j < eb ? dy[row + j] : 0.f;
                            dxv[j] = dv[j] * xv[j];
                            s_dA[j] = 0.f;
                            s_B[j] = 0.f;
                        }
                        const float *hcur = hs + (t - t0) * N * EB, *dat = das + (t - t0) * N * EB;
                        const float *hprev = t > t0 ? hs + (t - 1 - t0) * N * EB : h0;
                        for (long n = 0; n < N; ++n) {
                            float bn = bt[n], cn = ct[n], db = 0.f, dc = 0.f;
                            const float *an = At + n * EB, *hc = hcur + n * EB, *hp = hprev + n * EB, *da = dat + n * EB;
                            float *cj = carry + n * EB, *dan = dAt + n * EB;
                            #pragma omp simd reduction(+:db, dc)
                            for (long j = 0; j < EB; ++j) {
                                float gh = gy[j] * cn + cj[j];         /* d loss / d h_t */
                                float q = gh * da[j] * hp[j];          /* d loss / d (delta A) */
                                dc += gy[j] * hc[j];
                                db += gh * dxv[j];
                                s_dA[j] += q * an[j];
                                s_B[j] += gh * bn;
                                dan[j] += q * dv[j];
                                cj[j] = da[j] * gh;
                            }
                            dct[n] += dc;
                            dbt[n] += db;
                        }
                        for (long j = 0; j < eb; ++j) {
                            ddelta[row + j] = s_dA[j] + s_B[j] * xv[j];
                            dx[row + j] = s_B[j] * dv[j];
                        }
                    }
                }
                for (long j = 0; j < eb; ++j)
                    for (long n = 0; n < N; ++n) dAb[(eb0 + j) * N + n] = dAt[n * EB + j];
            }
            free(hs);
            free(das);
        }
    }
}

long rs_scan_max_state(void) { return MAX_N; }
