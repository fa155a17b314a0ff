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
 *
 * Inference (no autograd): rs_conv_silu and rs_gated_scan fuse the elementwise work around a
 * Mamba mixer's projections (mask, causal depthwise conv, SiLU, softplus, the D skip, the
 * SiLU(z) gate) into two passes; oracle: MambaBlock's PyTorch path (tested).
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

/* exp(v) for the decays exp(delta * A) (v <= 0): 2^k e^f with k = round(v log2 e) and
 * |f| <= ln 2 / 2, e^f by its degree-6 Taylor polynomial (relative error < 2e-7), inlined so the
 * compiler vectorises it with the state update instead of calling expf once per vector; 0
 * below exp(-87). */
static inline float exp_decay(float v) {
    float t = v * 1.44269504f, k = rintf(t), f = (t - k) * 0.69314718f;
    float p = 1.f + f * (1.f + f * (0.5f + f * (0.16666667f + f * (0.041666668f + f * (0.008333334f + f * 0.0013888889f)))));
    int bits = ((int)k + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return v < -87.f ? 0.f : p * scale;
}

/* A block's A transposed to [n][j], zero-padded to EB lanes (padded lanes: decay 1, input 0). */
static void load_block_A(const float *A, float *At, long N, long e0, long eb) {
    memset(At, 0, sizeof(float) * N * EB);
    for (long j = 0; j < eb; ++j)
        for (long n = 0; n < N; ++n) At[n * EB + j] = A[(e0 + j) * N + n];
}

/* One step of a block's states h ([n][j]) without keeping them: h = exp(dv A) h + dxv B_t;
 * acc = <C_t, h> per lane. */
static inline void state_step(float *h, const float *At, const float *dv, const float *dxv,
                              const float *bt, const float *ct, long N, float *acc) {
    for (long j = 0; j < EB; ++j)
        acc[j] = 0.f;
    for (long n = 0; n < N; ++n) {
        float bn = bt[n], cn = ct[n];
        float *hn = h + n * EB;
        const float *an = At + n * EB;
        #pragma omp simd
        for (long j = 0; j < EB; ++j) {
            float hv = exp_decay(dv[j] * an[j]) * hn[j] + dxv[j] * bn;
            hn[j] = hv;
            acc[j] += cn * hv;
        }
    }
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
        }
        if (!hs) {
            state_step(h, At, dv, dxv, bt, ct, N, acc);
            for (long j = 0; j < eb; ++j) y[row + j] = acc[j];
            continue;
        }
        for (long n = 0; n < N; ++n) {
            float bn = bt[n];
            float *hn = h + n * EB, *hsn = hs + ((t - t0) * N + n) * EB, *dan = das + ((t - t0) * N + n) * EB;
            const float *an = At + n * EB;
            #pragma omp simd
            for (long j = 0; j < EB; ++j) {
                float da = exp_decay(dv[j] * an[j]);
                float hv = da * hn[j] + dxv[j] * bn;
                hn[j] = hv;
                hsn[j] = hv;
                dan[j] = da;
            }
        }
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

static inline float silu(float v) { return v / (1.f + expf(-v)); }
static inline float softplus(float v) { return v > 20.f ? v : log1pf(expf(v)); }   /* torch's threshold */

/* u = silu(bias + sum_k wt[k] * (x * mask)[t - K + 1 + k]) * mask[t], x = the first E channels of
 * xz (B, L, 2E); wt (K, E) is the conv weight transposed; u (B, L, E). */
void rs_conv_silu(const float *xz, const float *mask, const float *wt, const float *bias, float *u,
                  long B, long L, long E, long K, int threads) {
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (long b = 0; b < B; ++b) {
        for (long t = 0; t < L; ++t) {
            float *out = u + (b * L + t) * E;
            memcpy(out, bias, sizeof(float) * E);
            for (long k = 0; k < K; ++k) {
                long s = t - (K - 1) + k;
                if (s < 0)
                    continue;
                float ms = mask[b * L + s];
                const float *xs = xz + (b * L + s) * 2 * E, *wk = wt + k * E;
                #pragma omp simd
                for (long e = 0; e < E; ++e) out[e] += wk[e] * (xs[e] * ms);
            }
            float mt = mask[b * L + t];
            #pragma omp simd
            for (long e = 0; e < E; ++e) out[e] = silu(out[e]) * mt;
        }
    }
}

/* out = (scan(u, delta, A, B, C) + D * u) * silu(z) with delta = softplus(dt + dt_bias) * mask:
 * u, dt, out (B, L, E); dbc (B, L, P) holds B_t at [R, R + N) and C_t at [R + N, R + 2N) of each
 * row (the x_proj output, read in place); z = channels [E, 2E) of xz (B, L, 2E). */
void rs_gated_scan(const float *u, const float *dt, const float *dt_bias, const float *mask,
                   const float *A, const float *dbc, const float *Dv, const float *xz, float *out,
                   long B, long L, long E, long N, long P, long R, long G, int threads) {
    #pragma omp parallel for num_threads(threads) collapse(2) schedule(dynamic, 1)
    for (long b = 0; b < B; ++b) {
        for (long g = 0; g < G; ++g) {
            long e0, e1;
            group_range(E, G, g, &e0, &e1);
            float h[MAX_N * EB], At[MAX_N * EB], dv[EB], dxv[EB], acc[EB];
            for (long eb0 = e0; eb0 < e1; eb0 += EB) {
                long eb = e1 - eb0 < EB ? e1 - eb0 : EB;
                load_block_A(A, At, N, eb0, eb);
                memset(h, 0, sizeof(float) * N * EB);
                for (long t = 0; t < L; ++t) {
                    const float *bt = dbc + (b * L + t) * P + R, *ct = bt + N;
                    const float *zt = xz + (b * L + t) * 2 * E + E + eb0;
                    long row = (b * L + t) * E + eb0;
                    float mt = mask[b * L + t];
                    for (long j = 0; j < EB; ++j) {
                        dv[j] = j < eb ? softplus(dt[row + j] + dt_bias[eb0 + j]) * mt : 0.f;
                        dxv[j] = j < eb ? dv[j] * u[row + j] : 0.f;
                    }
                    state_step(h, At, dv, dxv, bt, ct, N, acc);
                    for (long j = 0; j < eb; ++j)
                        out[row + j] = (acc[j] + Dv[eb0 + j] * u[row + j]) * silu(zt[j]);
                }
            }
        }
    }
}
