/* Fits one of rosetree's families to a CSV file of numbers and prints the tree in Newick
 * format and its score (and, for rose trees, the flat clusters the Python package reports as
 * labels_ by default and the log predictive density of each row).
 *
 *   fit brt|brt-learn|brt-shared|bhc|coalescent|coalescent-learn|pydt FILE.csv [SEED]
 *
 * brt and bhc use the beta-Bernoulli model for 0/1 data and the Normal-Gamma model
 * otherwise, with their data-driven defaults; brt-learn is brt with the model's
 * hyperparameters and gamma learnt with the tree (restarts seeded by SEED); brt-shared is brt
 * with one precision for all features of a cluster; coalescent is Brownian diffusion with rate 1
 * and observation noise 0.1, by Greedy-Rate1; coalescent-learn learns the rate with the tree
 * (at most 10 rounds, from 1); pydt is the diffusion tree with alpha = 1,
 * beta = 0, c = 1, sigma2 = 1 by 100 sweeps of MCMC from a draw of the prior.
 *
 * Build against the library, e.g. from the repository root after
 * `cargo build --release -p rosetree-capi`:
 *   cc -std=c99 -Wall -Werror -I rust/capi/include rust/capi/examples/fit.c \
 *      -L target/release -lrosetree_c -Wl,-rpath,target/release -o fit
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rosetree.h"

/* Reports the failure of `call` with the library's message and jumps to `done`. */
#define CHECK(call)                                                              \
    do {                                                                         \
        if ((status = (call)) != RT_STATUS_OK) {                                 \
            fprintf(stderr, "%s failed (%d): %s\n", #call, (int)status,          \
                    rt_last_error());                                            \
            goto done;                                                           \
        }                                                                        \
    } while (0)

/* Reads a CSV of numbers (a first line that does not parse is a header) into a
 * row-major array; returns NULL on failure. */
static double *read_csv(const char *path, size_t *n_rows, size_t *n_cols) {
    FILE *file = fopen(path, "r");
    char line[1 << 16];
    double *values = NULL;
    size_t len = 0, cap = 0, rows = 0, cols = 0, line_no = 0;
    if (!file) {
        perror(path);
        return NULL;
    }
    while (fgets(line, sizeof line, file)) {
        size_t k = 0;
        char *p = line;
        line_no++;
        if (line[strspn(line, " \r\n")] == '\0') continue;
        for (;;) {
            char *end;
            double v = strtod(p, &end);
            if (end == p) break;
            if (len == cap) {
                double *grown;
                cap = cap ? 2 * cap : 1024;
                grown = realloc(values, cap * sizeof *values);
                if (!grown) goto fail;
                values = grown;
            }
            values[len++] = v;
            k++;
            p = end + strspn(end, " ");
            if (*p != ',') break;
            p++;
        }
        if (k == 0 && rows == 0 && line_no == 1) continue; /* a header */
        if (rows == 0) cols = k;
        if (k != cols || k == 0) {
            fprintf(stderr, "%s:%zu: expected %zu numbers, found %zu\n", path, line_no, cols, k);
            goto fail;
        }
        rows++;
    }
    fclose(file);
    *n_rows = rows;
    *n_cols = cols;
    return values;
fail:
    fclose(file);
    free(values);
    return NULL;
}

static int is_binary(const double *x, size_t len) {
    size_t i;
    for (i = 0; i < len; i++)
        if (x[i] != 0.0 && x[i] != 1.0) return 0;
    return 1;
}

int main(int argc, char **argv) {
    rt_status status = RT_STATUS_OK;
    const char *family = argc > 1 ? argv[1] : "";
    size_t n_rows = 0, n_cols = 0, n_leaves = 0, n_nodes = 0, needed = 0, k = 0, i;
    unsigned long long seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 0;
    double *x = NULL, *log_predictive = NULL, score = 0.0;
    char *newick = NULL;
    int64_t *labels = NULL;
    rt_data *data = NULL;
    rt_model *model = NULL;
    rt_brt_params *brt = NULL;
    rt_coalescent_params *coalescent = NULL;
    rt_pydt_params *pydt = NULL;
    rt_fit *fit = NULL;
    int learn = !strcmp(family, "brt-learn");
    int shared = !strcmp(family, "brt-shared");
    int rose = learn || shared || !strcmp(family, "brt") || !strcmp(family, "bhc");

    int learn_rate = !strcmp(family, "coalescent-learn");
    if (argc < 3 ||
        !(rose || learn_rate || !strcmp(family, "coalescent") || !strcmp(family, "pydt"))) {
        fprintf(stderr,
                "usage: %s brt|brt-learn|brt-shared|bhc|coalescent|coalescent-learn|pydt FILE.csv "
                "[SEED]\n",
                argv[0]);
        return 2;
    }
    if (!(x = read_csv(argv[2], &n_rows, &n_cols))) return 1;
    CHECK(rt_data_new(x, n_rows, n_cols, &data));

    if (rose) {
        if (shared)
            CHECK(rt_model_normal_gamma_shared(NULL, 0, NAN, NAN, NAN, &model));
        else if (is_binary(x, n_rows * n_cols))
            CHECK(rt_model_beta_bernoulli(NULL, 0, NULL, 0, &model));
        else
            CHECK(rt_model_normal_gamma(NULL, 0, NAN, NAN, NULL, 0, &model));
        CHECK(rt_brt_params_new(&brt));
        if (!strcmp(family, "bhc")) {
            CHECK(rt_brt_params_set_binary(brt, true));
            CHECK(rt_brt_params_set_mixing(brt, RT_MIXING_DP, 1.0));
        }
        /* Per-feature hyperparameters and gamma, two restarts. */
        if (learn) CHECK(rt_brt_params_set_learning(brt, true, false, 2, seed));
        CHECK(rt_brt_fit(model, brt, data, &fit));
    } else if (learn_rate || !strcmp(family, "coalescent")) {
        CHECK(rt_coalescent_params_new(1.0, &coalescent));
        CHECK(rt_coalescent_params_set_noise(coalescent, 0.1));
        if (learn_rate) CHECK(rt_coalescent_params_set_learning(coalescent, 10));
        CHECK(rt_coalescent_fit(coalescent, data, &fit));
    } else {
        CHECK(rt_pydt_params_new(1.0, 0.0, 1.0, 1.0, &pydt));
        CHECK(rt_pydt_fit(pydt, data, seed, &fit));
    }

    /* Ask for the size, then write the text. */
    if (rt_fit_newick(fit, NULL, 0, &needed) != RT_STATUS_BUFFER_SIZE) goto done;
    if (!(newick = malloc(needed))) goto done;
    CHECK(rt_fit_newick(fit, newick, needed, NULL));
    CHECK(rt_fit_score(fit, &score));
    CHECK(rt_fit_size(fit, &n_leaves, &n_nodes));
    printf("newick %s\nscore %.17g\nnodes %zu\n", newick, score, n_nodes);
    if (rose) {
        if (!(labels = malloc(n_leaves * sizeof *labels))) goto done;
        CHECK(rt_fit_labels(fit, 1.0, 0.5, labels, n_leaves, &k));
        printf("clusters %zu\nlabels", k);
        for (i = 0; i < n_leaves; i++) printf(" %lld", (long long)labels[i]);
        printf("\n");
    }
    {
        /* The predictive density of each row: every family has one. */
        if (!(log_predictive = malloc(n_rows * sizeof *log_predictive))) goto done;
        CHECK(rt_fit_score_samples(fit, data, log_predictive, n_rows));
        printf("log_predictive");
        for (i = 0; i < n_rows; i++) printf(" %.17g", log_predictive[i]);
        printf("\n");
    }

done:
    free(x);
    free(newick);
    free(labels);
    free(log_predictive);
    rt_fit_free(fit);
    rt_pydt_params_free(pydt);
    rt_coalescent_params_free(coalescent);
    rt_brt_params_free(brt);
    rt_model_free(model);
    rt_data_free(data);
    return status == RT_STATUS_OK ? 0 : 1;
}
