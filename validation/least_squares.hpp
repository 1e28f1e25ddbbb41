#pragma once
/// @file Levenberg-Marquardt non-linear least squares (Eigen) for `stepsim calibrate`.
///
/// Contract: minimises |r(theta)|^2 + prior_weight^2 |theta|^2 from theta = 0, with a
/// forward-difference Jacobian. Parameters are log multipliers of a model's figures, so
/// theta = 0 is the uncalibrated model and the small prior keeps any parameter the residuals
/// do not determine at exactly its preset value instead of drifting along a flat direction.
/// Deterministic: the same problem gives the same result bit for bit.
#include <Eigen/Dense>
#include <functional>
#include <vector>

namespace stepsim::validation {

struct LeastSquaresProblem {
  int parameters = 0;
  /// Residual vector for `theta` (always the same length).
  std::function<Eigen::VectorXd(const Eigen::VectorXd& theta)> residuals;
  double prior_weight = 1e-3;
  double step = 1e-4;  ///< forward-difference step in theta
};

struct LeastSquaresResult {
  Eigen::VectorXd theta;
  Eigen::VectorXd residuals;        ///< at theta
  std::vector<bool> determined;     ///< false where the residuals do not depend on a parameter
  Eigen::VectorXd standard_error;   ///< sqrt(diag((J^T J)^-1) * s^2) for determined parameters, else 0
  int iterations = 0;
  double initial_cost = 0;          ///< |r(0)|^2
  double cost = 0;                  ///< |r(theta)|^2
};

/// @brief Runs Levenberg-Marquardt until the relative cost decrease is below 1e-10 or
/// `max_iterations` steps were taken.
LeastSquaresResult solve_least_squares(const LeastSquaresProblem& problem, int max_iterations = 100);

/// @brief The forward-difference Jacobian of `problem.residuals` at `theta`.
Eigen::MatrixXd numeric_jacobian(const LeastSquaresProblem& problem, const Eigen::VectorXd& theta,
                                 const Eigen::VectorXd& r0);

}  // namespace stepsim::validation
