// Command-line driver for the reference Pitman–Yor diffusion tree sampler of Knowles &
// Ghahramani (github.com/davidaknowles/pydt), used by benchmarks/peer_pydt.py.
//
// It compiles against that repository's headers (g++ -std=gnu++98 -O3 -I <pydt>) and calls
// its own slice sampler `SliceSample` unchanged. It differs from the repository's main.cpp
// only in what a benchmark needs:
//   * every row is a leaf (main.cpp shuffles the rows, holds out 10 % as test data and
//     labels the shuffled rows with the unshuffled names);
//   * leaf i is labelled "i" (its row in the data file);
//   * alpha (the peer's "theta"), beta (its "alpha") and c are set from the command line,
//     and either all three are held fixed or all three are learnt (main.cpp always learns c
//     and can only fix theta, with alpha = 0);
//   * the random number generator is seeded with `seed` (main.cpp always seeds it with 0);
//   * no held-out predictive density is computed during sampling;
//   * after sampling it prints the final tree and its log likelihood and log prior.
//
// Usage: pydt_driver data.txt iterations alpha beta c learn seed init workdir
//   data.txt   whitespace-separated rows of D numbers, one row per point
//   learn      1: slice-sample alpha, beta, c every 50 iterations; 0: keep them fixed
//   init       "random" (a draw from the Dirichlet diffusion tree with c = 1, as main.cpp
//              does) or "flat" (all leaves on one branch point at t = 0.5)
//   workdir    where SliceSample writes its trace (slice_trace.txt) and tree
//              (slice_newick.txt)
//
// Output lines on stdout (after the sampler's own "It ..." lines):
//   FINAL <key> <value>   for wall_s, iterations, alpha, beta, c, log_likelihood,
//                         log_prior_structure, log_prior_times, log_joint;
//   FINAL newick <tree>   the final tree; each node is written "name:t-s" with t its time
//                         and s its parent's time (leaves at t = 1).

#include <sys/time.h>

#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <list>
#include <sstream>
#include <string>
#include <vector>

#include "Tree.hpp"
#include "pydtsamplers.hpp"

static double wall_seconds() {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return (double)tv.tv_sec + 1e-6 * (double)tv.tv_usec;
}

static std::vector<std::vector<double> > read_rows(const char* path) {
  std::vector<std::vector<double> > rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream is(line);
    std::vector<double> row;
    double x;
    while (is >> x) row.push_back(x);
    if (!row.empty()) rows.push_back(row);
  }
  return rows;
}

static void print_components(const char* prefix, Tree* tree, BaseSettings& s) {
  s.HypersChanged();
  double ll = tree->MarginalLikelihoodOnly(s);
  double structure = tree->LogEvidenceStructureOnly(s);
  double times = tree->LogEvidenceTimes(s);
  std::cout << prefix << " log_likelihood " << ll << "\n";
  std::cout << prefix << " log_prior_structure " << structure << "\n";
  std::cout << prefix << " log_prior_times " << times << "\n";
  std::cout << prefix << " log_joint " << ll + structure + times << "\n";
}

int main(int argc, char* argv[]) {
  if (argc != 10) {
    std::cerr << "usage: pydt_driver data.txt iterations alpha beta c learn seed init workdir"
              << std::endl;
    return 2;
  }
  std::vector<std::vector<double> > rows = read_rows(argv[1]);
  int iterations = std::atoi(argv[2]);
  double alpha = std::atof(argv[3]);
  double beta = std::atof(argv[4]);
  double c = std::atof(argv[5]);
  bool learn = std::atoi(argv[6]) != 0;
  unsigned int seed = (unsigned int)std::strtoul(argv[7], NULL, 10);
  std::string init = argv[8];
  std::string workdir = argv[9];
  if (rows.size() < 2) {
    std::cerr << "need at least 2 rows in " << argv[1] << std::endl;
    return 2;
  }
  size_t d = rows[0].size();
  for (size_t i = 0; i < rows.size(); i++) {
    if (rows[i].size() != d) {
      std::cerr << "row " << i << " has " << rows[i].size() << " numbers, expected " << d
                << std::endl;
      return 2;
    }
  }
  std::cout << std::setprecision(17);
  std::srand(seed);

  Settings settings;
  settings.D = (int)d;
  settings.theta = alpha;
  settings.alpha = beta;
  settings.c = c;
  settings.sampleTheta = learn;
  settings.sampleAlpha = learn;
  settings.sampleC = learn;
  settings.gen.seed(seed);

  std::list<TreeNode*> leaves;
  for (size_t i = 0; i < rows.size(); i++) {
    TreeNode* leaf = new TreeNode(1.0, true);
    std::ostringstream name;
    name << i;
    leaf->label = name.str();
    boost::numeric::ublas::vector<double> x(d);
    for (size_t j = 0; j < d; j++) x[j] = rows[i][j];
    leaf->Marg_Location.SetPoint(x);
    leaves.push_back(leaf);
  }

  // main.cpp draws the initial tree from the Dirichlet diffusion tree (theta = alpha = 0,
  // c = 1) with a second settings object.
  Settings binary;
  binary.D = settings.D;
  binary.theta = 0.0;
  binary.alpha = 0.0;
  binary.gen.seed(seed + 1);
  Tree* tree = init == "flat" ? Tree::FlatTree(leaves, settings) : Tree::RandomTree(leaves, binary);
  print_components("INITIAL", tree, settings);
  std::cout << std::flush;

  std::list<boost::numeric::ublas::vector<double> > no_test_data;
  std::string trace = workdir + "/slice_trace.txt";
  std::string newick = workdir + "/slice_newick.txt";
  double start = wall_seconds();
  tree = SliceSample(tree, no_test_data, settings, iterations, trace.c_str(), newick.c_str());
  double elapsed = wall_seconds() - start;

  std::cout << std::setprecision(17);
  std::cout << "FINAL wall_s " << elapsed << "\n";
  std::cout << "FINAL iterations " << iterations << "\n";
  std::cout << "FINAL alpha " << settings.theta << "\n";
  std::cout << "FINAL beta " << settings.alpha << "\n";
  std::cout << "FINAL c " << settings.c << "\n";
  print_components("FINAL", tree, settings);
  std::cout << "FINAL newick " << tree->root->newick(0.0) << std::endl;

  delete tree;
  for (std::list<TreeNode*>::iterator i = leaves.begin(); i != leaves.end(); ++i) delete *i;
  return 0;
}
