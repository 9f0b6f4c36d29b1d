// The C++ face of rosetree's C interface: handles owned by std::unique_ptr, failures
// thrown as exceptions carrying the library's message. Does what fit.c does, with the same
// arguments and output:
//
//   fit_cpp brt|brt-learn|brt-shared|bhc|coalescent|coalescent-learn|pydt FILE.csv [SEED]
//
// Build, e.g. from the repository root after `cargo build --release -p rosetree-capi`:
//   c++ -std=c++17 -Wall -Werror -I rust/capi/include rust/capi/examples/fit.cpp
//       -L target/release -lrosetree_c -Wl,-rpath,target/release -o fit_cpp
// (one command).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "rosetree.h"

namespace rosetree {

// Throws the library's message when a call fails.
void check(rt_status status, const char *what) {
    if (status != RT_STATUS_OK) {
        throw std::runtime_error(std::string(what) + " failed (" +
                                 std::to_string(static_cast<int>(status)) +
                                 "): " + rt_last_error());
    }
}

// A handle that frees itself.
template <typename T, rt_status (*Free)(T *)>
struct Deleter {
    void operator()(T *handle) const { Free(handle); }
};
template <typename T, rt_status (*Free)(T *)>
using Handle = std::unique_ptr<T, Deleter<T, Free>>;

using Data = Handle<rt_data, rt_data_free>;
using Model = Handle<rt_model, rt_model_free>;
using BrtParams = Handle<rt_brt_params, rt_brt_params_free>;
using CoalescentParams = Handle<rt_coalescent_params, rt_coalescent_params_free>;
using PydtParams = Handle<rt_pydt_params, rt_pydt_params_free>;

// Calls a constructor `make(args..., &out)` and owns what it returns.
template <typename H, typename F, typename... Args>
H make(const char *what, F make_fn, Args... args) {
    typename H::pointer raw = nullptr;
    check(make_fn(args..., &raw), what);
    return H(raw);
}

class Fit {
  public:
    explicit Fit(rt_fit *fit) : fit_(fit) {}

    std::string newick() const {
        size_t needed = 0;
        rt_fit_newick(fit_.get(), nullptr, 0, &needed);
        std::string text(needed, '\0');
        check(rt_fit_newick(fit_.get(), &text[0], text.size(), nullptr), "rt_fit_newick");
        text.pop_back();  // the terminator
        return text;
    }

    double score() const {
        double value = 0.0;
        check(rt_fit_score(fit_.get(), &value), "rt_fit_score");
        return value;
    }

    std::pair<size_t, size_t> size() const {
        size_t leaves = 0, nodes = 0;
        check(rt_fit_size(fit_.get(), &leaves, &nodes), "rt_fit_size");
        return {leaves, nodes};
    }

    std::vector<double> score_samples(const rt_data *data, size_t n_rows) const {
        std::vector<double> values(n_rows);
        check(rt_fit_score_samples(fit_.get(), data, values.data(), values.size()),
              "rt_fit_score_samples");
        return values;
    }

    // The Python package's default labels_: the DP cut (concentration 1, threshold 0.5).
    std::vector<int64_t> labels(size_t *n_clusters) const {
        std::vector<int64_t> out(size().first);
        check(rt_fit_labels(fit_.get(), 1.0, 0.5, out.data(), out.size(), n_clusters),
              "rt_fit_labels");
        return out;
    }

  private:
    Handle<rt_fit, rt_fit_free> fit_;
};

}  // namespace rosetree

static std::vector<double> read_csv(const std::string &path, size_t &rows, size_t &cols) {
    std::ifstream file(path);
    if (!file) throw std::runtime_error("cannot open " + path);
    std::vector<double> values;
    std::string line;
    rows = cols = 0;
    for (size_t line_no = 1; std::getline(file, line); line_no++) {
        if (line.find_first_not_of(" \r") == std::string::npos) continue;
        std::vector<double> row;
        std::stringstream fields(line);
        std::string field;
        try {
            while (std::getline(fields, field, ',')) row.push_back(std::stod(field));
        } catch (const std::invalid_argument &) {
            if (line_no == 1) continue;  // a header
            throw std::runtime_error(path + ":" + std::to_string(line_no) + ": not a number");
        }
        if (rows == 0) cols = row.size();
        if (row.size() != cols) {
            throw std::runtime_error(path + ":" + std::to_string(line_no) + ": expected " +
                                     std::to_string(cols) + " numbers");
        }
        values.insert(values.end(), row.begin(), row.end());
        rows++;
    }
    return values;
}

int main(int argc, char **argv) try {
    using namespace rosetree;
    const std::string family = argc > 1 ? argv[1] : "";
    const bool learn = family == "brt-learn";
    const bool shared = family == "brt-shared";
    const bool rose = learn || shared || family == "brt" || family == "bhc";
    const bool learn_rate = family == "coalescent-learn";
    if (argc < 3 || !(rose || learn_rate || family == "coalescent" || family == "pydt")) {
        std::cerr << "usage: " << argv[0]
                  << " brt|brt-learn|brt-shared|bhc|coalescent|coalescent-learn|pydt FILE.csv"
                     " [SEED]\n";
        return 2;
    }
    const uint64_t seed = argc > 3 ? std::stoull(argv[3]) : 0;
    size_t n_rows = 0, n_cols = 0;
    const std::vector<double> x = read_csv(argv[2], n_rows, n_cols);
    const Data data = make<Data>("rt_data_new", rt_data_new, x.data(), n_rows, n_cols);

    rt_fit *raw = nullptr;
    if (rose) {
        bool binary_data = true;
        for (double v : x) binary_data = binary_data && (v == 0.0 || v == 1.0);
        const Model model =
            shared ? make<Model>("rt_model_normal_gamma_shared", rt_model_normal_gamma_shared,
                                 nullptr, size_t{0}, NAN, NAN, NAN)
            : binary_data ? make<Model>("rt_model_beta_bernoulli", rt_model_beta_bernoulli,
                                        nullptr, size_t{0}, nullptr, size_t{0})
                          : make<Model>("rt_model_normal_gamma", rt_model_normal_gamma,
                                        nullptr, size_t{0}, NAN, NAN, nullptr, size_t{0});
        const BrtParams params = make<BrtParams>("rt_brt_params_new", rt_brt_params_new);
        if (family == "bhc") {
            check(rt_brt_params_set_binary(params.get(), true), "rt_brt_params_set_binary");
            check(rt_brt_params_set_mixing(params.get(), RT_MIXING_DP, 1.0),
                  "rt_brt_params_set_mixing");
        }
        if (learn)
            check(rt_brt_params_set_learning(params.get(), true, false, 2, seed),
                  "rt_brt_params_set_learning");
        check(rt_brt_fit(model.get(), params.get(), data.get(), &raw), "rt_brt_fit");
    } else if (learn_rate || family == "coalescent") {
        const CoalescentParams params =
            make<CoalescentParams>("rt_coalescent_params_new", rt_coalescent_params_new, 1.0);
        check(rt_coalescent_params_set_noise(params.get(), 0.1), "rt_coalescent_params_set_noise");
        if (learn_rate)
            check(rt_coalescent_params_set_learning(params.get(), 10),
                  "rt_coalescent_params_set_learning");
        check(rt_coalescent_fit(params.get(), data.get(), &raw), "rt_coalescent_fit");
    } else {
        const PydtParams params =
            make<PydtParams>("rt_pydt_params_new", rt_pydt_params_new, 1.0, 0.0, 1.0, 1.0);
        check(rt_pydt_fit(params.get(), data.get(), seed, &raw), "rt_pydt_fit");
    }
    const Fit fit(raw);

    char score[64];
    std::snprintf(score, sizeof score, "%.17g", fit.score());
    std::cout << "newick " << fit.newick() << "\nscore " << score << "\nnodes "
              << fit.size().second << "\n";
    if (rose) {
        size_t k = 0;
        const std::vector<int64_t> labels = fit.labels(&k);
        std::cout << "clusters " << k << "\nlabels";
        for (int64_t label : labels) std::cout << ' ' << label;
        std::cout << "\n";
    }
    {
        std::cout << "log_predictive";
        for (double value : fit.score_samples(data.get(), n_rows)) {
            std::snprintf(score, sizeof score, " %.17g", value);
            std::cout << score;
        }
        std::cout << "\n";
    }
    return 0;
} catch (const std::exception &e) {
    std::cerr << e.what() << "\n";
    return 1;
}
