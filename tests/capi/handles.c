/* Every function of rosetree's C interface, called with null, freed and mistyped handles
 * and with bad buffers and parameters: each returns its error code and message, and
 * nothing is dereferenced (run under AddressSanitizer by tests/test_capi.py). Prints the
 * number of checks and exits nonzero on any failure. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rosetree.h"

static int checks = 0, failures = 0;

static void expect(rt_status got, rt_status want, const char *call, int line) {
    checks++;
    if (got != want) {
        fprintf(stderr, "line %d: %s returned %d, expected %d (%s)\n", line, call, (int)got,
                (int)want, rt_last_error());
        failures++;
    }
}

static void expect_message(const char *needle, int line) {
    checks++;
    if (!strstr(rt_last_error(), needle)) {
        fprintf(stderr, "line %d: message \"%s\" does not name \"%s\"\n", line, rt_last_error(),
                needle);
        failures++;
    }
}

/* An interrupt callback that counts its calls in `*context` and stops the fit at once. */
static bool stop(void *context) {
    ++*(int *)context;
    return true;
}

#define EXPECT(call, want) expect((call), (want), #call, __LINE__)
#define MESSAGE(needle) expect_message((needle), __LINE__)
#define NUL RT_STATUS_NULL_HANDLE
#define BAD RT_STATUS_INVALID_HANDLE

/* Every function that takes a handle, with `data`, `model`, the three option handles and
 * `fit` as given: all must return `want` (null or freed handles). */
static void every_call(rt_data *data, rt_model *model, rt_brt_params *brt,
                       rt_coalescent_params *coal, rt_pydt_params *pydt, rt_fit *fit,
                       rt_status want) {
    size_t a = 0, b = 0;
    double x = 0.0, out[6];
    int64_t ids[11];
    char text[256];
    rt_fit *made = NULL;
    EXPECT(rt_data_shape(data, &a, &b), want);
    EXPECT(rt_brt_params_set_mixing(brt, RT_MIXING_DP, 1.0), want);
    EXPECT(rt_brt_params_set_binary(brt, true), want);
    EXPECT(rt_brt_params_set_n_threads(brt, 1), want);
    EXPECT(rt_brt_params_set_learning(brt, true, false, 0, 1), want);
    EXPECT(rt_coalescent_params_set_noise(coal, 0.1), want);
    EXPECT(rt_coalescent_params_set_learning(coal, 3), want);
    EXPECT(rt_coalescent_params_set_inference(coal, RT_COALESCENT_INFERENCE_GREEDY_RATE1), want);
    EXPECT(rt_coalescent_params_set_n_threads(coal, 1), want);
    EXPECT(rt_pydt_params_set_iterations(pydt, 4, 2), want);
    EXPECT(rt_brt_params_set_interrupt(brt, NULL, NULL), want);
    EXPECT(rt_coalescent_params_set_interrupt(coal, NULL, NULL), want);
    EXPECT(rt_pydt_params_set_interrupt(pydt, NULL, NULL), want);
    EXPECT(rt_brt_fit(model, brt, data, &made), want);
    EXPECT(rt_coalescent_fit(coal, data, &made), want);
    EXPECT(rt_pydt_fit(pydt, data, 1, &made), want);
    EXPECT(rt_fit_size(fit, &a, &b), want);
    EXPECT(rt_fit_score(fit, &x), want);
    EXPECT(rt_fit_parents(fit, ids, 11), want);
    EXPECT(rt_fit_heights(fit, out, 6), want);
    EXPECT(rt_fit_newick(fit, text, sizeof text, &a), want);
    EXPECT(rt_fit_cut(fit, 0.5, ids, 6, &a), want);
    EXPECT(rt_fit_labels(fit, 1.0, 0.5, ids, 6, &a), want);
    EXPECT(rt_fit_score_samples(fit, data, out, 6), want);
    EXPECT(rt_data_free(data), want);
    EXPECT(rt_model_free(model), want);
    EXPECT(rt_brt_params_free(brt), want);
    EXPECT(rt_coalescent_params_free(coal), want);
    EXPECT(rt_pydt_params_free(pydt), want);
    EXPECT(rt_fit_free(fit), want);
    if (made) {
        fprintf(stderr, "a fit was made from bad handles\n");
        failures++;
    }
}

/* The six rows of `data` score finitely under `fit`; rows of three columns and a short
 * buffer are refused. */
static void expect_scores(const rt_fit *fit, const rt_data *data, const rt_data *wide,
                          const char *family) {
    double scores[6];
    size_t i;
    EXPECT(rt_fit_score_samples(fit, data, scores, 6), RT_STATUS_OK);
    for (i = 0; i < 6; i++) {
        checks++;
        if (!isfinite(scores[i])) {
            fprintf(stderr, "%s: log density %g of row %zu\n", family, scores[i], i);
            failures++;
        }
    }
    EXPECT(rt_fit_score_samples(fit, wide, scores, 1), RT_STATUS_SHAPE_MISMATCH);
    MESSAGE("3 columns");
    EXPECT(rt_fit_score_samples(fit, data, scores, 5), RT_STATUS_BUFFER_SIZE);
}

int main(void) {
    /* Six rows in two groups; the real-valued copy for the coalescent and the diffusion
     * tree. */
    const double binary[12] = {1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1};
    const double real[12] = {0.1, 0.2, 0.0, 0.3, 0.2, 0.1, 3.0, 3.1, 3.2, 2.9, 3.1, 3.0};
    const double two[2] = {2, 0}, three[3] = {0, 1, 0};
    rt_data *data = NULL, *real_data = NULL, *bad = NULL, *wide = NULL;
    rt_model *model = NULL;
    rt_brt_params *brt = NULL;
    rt_coalescent_params *coal = NULL;
    rt_pydt_params *pydt = NULL;
    rt_fit *fit = NULL, *coal_fit = NULL, *pydt_fit = NULL, *made = NULL;
    int64_t parents[11], labels[6];
    double heights[11], scores[6], score = 0.0;
    char small[4];
    size_t needed = 0, k = 0;

    /* Constructors refuse a null destination. */
    EXPECT(rt_data_new(binary, 6, 2, NULL), NUL);
    EXPECT(rt_model_beta_bernoulli(NULL, 0, NULL, 0, NULL), NUL);
    EXPECT(rt_brt_params_new(NULL), NUL);
    EXPECT(rt_coalescent_params_new(1.0, NULL), NUL);
    EXPECT(rt_pydt_params_new(1.0, 0.0, 1.0, 1.0, NULL), NUL);
    MESSAGE("out");

    /* Valid handles of every kind. */
    EXPECT(rt_data_new(binary, 6, 2, &data), RT_STATUS_OK);
    EXPECT(rt_data_new(real, 6, 2, &real_data), RT_STATUS_OK);
    EXPECT(rt_model_beta_bernoulli(NULL, 0, NULL, 0, &model), RT_STATUS_OK);
    EXPECT(rt_brt_params_new(&brt), RT_STATUS_OK);
    EXPECT(rt_coalescent_params_new(1.0, &coal), RT_STATUS_OK);
    EXPECT(rt_pydt_params_new(1.0, 0.0, 1.0, 1.0, &pydt), RT_STATUS_OK);
    EXPECT(rt_pydt_params_set_iterations(pydt, 4, 2), RT_STATUS_OK);
    EXPECT(rt_brt_fit(model, brt, data, &fit), RT_STATUS_OK);
    EXPECT(rt_coalescent_fit(coal, real_data, &coal_fit), RT_STATUS_OK);
    EXPECT(rt_pydt_fit(pydt, real_data, 3, &pydt_fit), RT_STATUS_OK);

    /* Null handles, then handles of another kind. */
    every_call(NULL, NULL, NULL, NULL, NULL, NULL, NUL);
    MESSAGE("null");
    every_call((rt_data *)model, (rt_model *)data, (rt_brt_params *)coal,
               (rt_coalescent_params *)brt, (rt_pydt_params *)fit, (rt_fit *)pydt, BAD);
    MESSAGE("not a live");

    /* Results go only into buffers of the right length. */
    EXPECT(rt_fit_parents(fit, parents, 10), RT_STATUS_BUFFER_SIZE);
    MESSAGE("parents");
    EXPECT(rt_fit_parents(fit, NULL, 11), RT_STATUS_BUFFER_SIZE);
    EXPECT(rt_fit_size(fit, &k, NULL), RT_STATUS_BUFFER_SIZE);
    EXPECT(rt_fit_newick(fit, small, sizeof small, &needed), RT_STATUS_BUFFER_SIZE);
    checks++;
    if (needed < 10) {
        fprintf(stderr, "rt_fit_newick reported %zu bytes needed\n", needed);
        failures++;
    }
    EXPECT(rt_fit_size(fit, &k, &needed), RT_STATUS_OK);
    EXPECT(rt_fit_heights(fit, heights, needed), RT_STATUS_OK);
    EXPECT(rt_fit_cut(fit, 0.5, labels, 6, NULL), RT_STATUS_OK);
    EXPECT(rt_fit_labels(fit, 1.0, 0.5, labels, 6, &k), RT_STATUS_OK);
    EXPECT(rt_fit_labels(fit, 0.0, 0.5, labels, 6, &k), RT_STATUS_INVALID_PARAMETER);
    MESSAGE("dp_alpha");
    EXPECT(rt_fit_labels(fit, 1.0, 1.5, labels, 6, &k), RT_STATUS_INVALID_PARAMETER);
    MESSAGE("threshold");
    EXPECT(rt_fit_score_samples(fit, data, scores, 6), RT_STATUS_OK);
    EXPECT(rt_fit_score_samples(fit, data, scores, 5), RT_STATUS_BUFFER_SIZE);
    EXPECT(rt_fit_score(fit, &score), RT_STATUS_OK);
    checks++;
    if (!(score < 0.0 && isfinite(score))) {
        fprintf(stderr, "log evidence %g\n", score);
        failures++;
    }

    /* Bad parameters and data name what is wrong. */
    EXPECT(rt_brt_params_set_mixing(brt, 7, 0.5), RT_STATUS_INVALID_PARAMETER);
    MESSAGE("mixing");
    EXPECT(rt_brt_params_set_mixing(brt, RT_MIXING_BRT, 1.5), RT_STATUS_OK);
    EXPECT(rt_brt_fit(model, brt, data, &made), RT_STATUS_INVALID_PARAMETER);
    MESSAGE("gamma");
    EXPECT(rt_brt_params_set_mixing(brt, RT_MIXING_BRT, 0.5), RT_STATUS_OK);
    EXPECT(rt_data_new(two, 1, 2, &bad), RT_STATUS_OK);
    EXPECT(rt_brt_fit(model, brt, bad, &made), RT_STATUS_INVALID_DATA);
    MESSAGE("row 0, column 0");
    EXPECT(rt_data_new(three, 1, 3, &wide), RT_STATUS_OK);
    EXPECT(rt_fit_score_samples(fit, wide, scores, 1), RT_STATUS_SHAPE_MISMATCH);
    MESSAGE("3 columns");
    /* Every family's fit has a predictive density. */
    expect_scores(pydt_fit, real_data, wide, "diffusion tree");
    expect_scores(coal_fit, real_data, wide, "coalescent");
    EXPECT(rt_pydt_params_set_iterations(pydt, 4, 4), RT_STATUS_INVALID_PARAMETER);
    MESSAGE("burn_in");
    EXPECT(rt_coalescent_params_set_inference(coal, 9), RT_STATUS_INVALID_PARAMETER);
    MESSAGE("inference");
    EXPECT(rt_coalescent_fit(coal, data, &made), RT_STATUS_INVALID_DATA);
    MESSAGE("rows 0 and 1 are equal"); /* without observation noise */
    EXPECT(rt_fit_cut(coal_fit, 0.5, labels, 6, NULL), BAD);
    MESSAGE("rose tree");
    EXPECT(rt_data_new(NULL, 2, 2, &bad), RT_STATUS_BUFFER_SIZE);
    checks++;
    if (made) {
        fprintf(stderr, "a fit was made from bad input\n");
        failures++;
    }

    /* An interrupt callback stops every family's fit; cleared, the fits run again. */
    {
        static double many[4000];
        int calls = 0, i;
        rt_data *big = NULL;
        for (i = 0; i < 4000; i++) many[i] = (double)((i * 7919 + i / 2) % 5 == 0);
        EXPECT(rt_data_new(many, 2000, 2, &big), RT_STATUS_OK);
        EXPECT(rt_brt_params_set_interrupt(brt, stop, &calls), RT_STATUS_OK);
        EXPECT(rt_brt_fit(model, brt, big, &made), RT_STATUS_INTERRUPTED);
        MESSAGE("interrupted");
        EXPECT(rt_coalescent_params_set_interrupt(coal, stop, &calls), RT_STATUS_OK);
        EXPECT(rt_coalescent_params_set_noise(coal, 0.1), RT_STATUS_OK);
        EXPECT(rt_coalescent_fit(coal, big, &made), RT_STATUS_INTERRUPTED);
        EXPECT(rt_pydt_params_set_interrupt(pydt, stop, &calls), RT_STATUS_OK);
        EXPECT(rt_pydt_fit(pydt, big, 1, &made), RT_STATUS_INTERRUPTED);
        checks++;
        if (calls < 3 || made) {
            fprintf(stderr, "interrupt called %d times; fit %p\n", calls, (void *)made);
            failures++;
        }
        EXPECT(rt_brt_params_set_interrupt(brt, NULL, NULL), RT_STATUS_OK);
        EXPECT(rt_brt_fit(model, brt, data, &made), RT_STATUS_OK);
        EXPECT(rt_fit_free(made), RT_STATUS_OK);
        EXPECT(rt_data_free(big), RT_STATUS_OK);
    }

    /* Freed handles: every call, a second free included, is refused. */
    EXPECT(rt_data_free(bad), RT_STATUS_OK);
    EXPECT(rt_data_free(wide), RT_STATUS_OK);
    EXPECT(rt_data_free(real_data), RT_STATUS_OK);
    EXPECT(rt_fit_free(coal_fit), RT_STATUS_OK);
    EXPECT(rt_fit_free(pydt_fit), RT_STATUS_OK);
    EXPECT(rt_data_free(data), RT_STATUS_OK);
    EXPECT(rt_model_free(model), RT_STATUS_OK);
    EXPECT(rt_brt_params_free(brt), RT_STATUS_OK);
    EXPECT(rt_coalescent_params_free(coal), RT_STATUS_OK);
    EXPECT(rt_pydt_params_free(pydt), RT_STATUS_OK);
    EXPECT(rt_fit_free(fit), RT_STATUS_OK);
    every_call(data, model, brt, coal, pydt, fit, BAD);
    MESSAGE("freed");

    checks++;
    if (!rt_version() || !*rt_version()) failures++;
    printf("%d checks, %d failures\n", checks, failures);
    return failures != 0;
}
