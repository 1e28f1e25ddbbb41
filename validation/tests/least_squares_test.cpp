// Levenberg-Marquardt: known optima of exponential and power-law fits, undetermined
// parameters left at their prior, determinism.
#include <gtest/gtest.h>

#include <cmath>

#include "validation/least_squares.hpp"

namespace stepsim::validation {
namespace {

// t(x) = a * exp(theta0) + x / (b * exp(theta1)): a latency and a bandwidth multiplier, the
// shape of every alpha-beta calibration; the data come from known multipliers 1.7 and 0.6.
LeastSquaresProblem alpha_beta_problem(int extra_parameters) {
  LeastSquaresProblem p;
  p.parameters = 2 + extra_parameters;
  p.prior_weight = 1e-6;
  p.residuals = [](const Eigen::VectorXd& theta) {
    const double a = 2e-6, b = 100e9;
    Eigen::VectorXd r(8);
    for (int i = 0; i < 8; ++i) {
      const double x = std::pow(8.0, i + 2);
      const double measured = a * 1.7 + x / (b * 0.6);
      const double predicted = a * std::exp(theta[0]) + x / (b * std::exp(theta[1]));
      r[i] = std::log(predicted / measured);
    }
    return r;
  };
  return p;
}

TEST(LeastSquares, RecoversLatencyAndBandwidthMultipliers) {
  const LeastSquaresResult fit = solve_least_squares(alpha_beta_problem(0));
  EXPECT_NEAR(std::exp(fit.theta[0]), 1.7, 1e-4);
  EXPECT_NEAR(std::exp(fit.theta[1]), 0.6, 1e-6);
  EXPECT_LT(fit.cost, 1e-12);
  EXPECT_GT(fit.initial_cost, 0.1);
  EXPECT_TRUE(fit.determined[0]);
  EXPECT_TRUE(fit.determined[1]);
}

TEST(LeastSquares, ParameterTheResidualsIgnoreStaysAtThePresetValue) {
  const LeastSquaresResult fit = solve_least_squares(alpha_beta_problem(1));
  EXPECT_FALSE(fit.determined[2]);
  EXPECT_EQ(fit.theta[2], 0.0);
  EXPECT_EQ(fit.standard_error[2], 0.0);
  EXPECT_NEAR(std::exp(fit.theta[1]), 0.6, 1e-6);
}

TEST(LeastSquares, CollinearParametersShareTheMoveAndStayFinite) {
  // Two multipliers of the same bandwidth: only their sum is determined; the prior splits it evenly.
  LeastSquaresProblem p;
  p.parameters = 2;
  p.prior_weight = 1e-3;
  p.residuals = [](const Eigen::VectorXd& theta) {
    Eigen::VectorXd r(3);
    for (int i = 0; i < 3; ++i) r[i] = theta[0] + theta[1] - std::log(0.5);
    return r;
  };
  const LeastSquaresResult fit = solve_least_squares(p);
  EXPECT_NEAR(fit.theta[0] + fit.theta[1], std::log(0.5), 1e-5);
  EXPECT_NEAR(fit.theta[0], fit.theta[1], 1e-9);
}

TEST(LeastSquares, SameProblemSameResultBitForBit) {
  const LeastSquaresResult a = solve_least_squares(alpha_beta_problem(1));
  const LeastSquaresResult b = solve_least_squares(alpha_beta_problem(1));
  ASSERT_EQ(a.theta.size(), b.theta.size());
  for (int k = 0; k < a.theta.size(); ++k) EXPECT_EQ(a.theta[k], b.theta[k]);
  EXPECT_EQ(a.iterations, b.iterations);
}

TEST(LeastSquares, StandardErrorsShrinkWithExactData) {
  const LeastSquaresResult fit = solve_least_squares(alpha_beta_problem(0));
  EXPECT_LT(fit.standard_error[0], 1e-3);
  EXPECT_LT(fit.standard_error[1], 1e-3);
}

}  // namespace
}  // namespace stepsim::validation
