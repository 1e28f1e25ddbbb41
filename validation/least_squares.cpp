#include "validation/least_squares.hpp"

#include <cmath>
#include <stdexcept>

namespace stepsim::validation {
namespace {

// A parameter whose Jacobian column is this small relative to the largest moves no residual.
constexpr double kUndetermined = 1e-9;

double cost_of(const LeastSquaresProblem& p, const Eigen::VectorXd& r, const Eigen::VectorXd& theta) {
  return r.squaredNorm() + p.prior_weight * p.prior_weight * theta.squaredNorm();
}

}  // namespace

Eigen::MatrixXd numeric_jacobian(const LeastSquaresProblem& problem, const Eigen::VectorXd& theta,
                                 const Eigen::VectorXd& r0) {
  Eigen::MatrixXd j(r0.size(), problem.parameters);
  for (int k = 0; k < problem.parameters; ++k) {
    Eigen::VectorXd t = theta;
    t[k] += problem.step;
    const Eigen::VectorXd r = problem.residuals(t);
    if (r.size() != r0.size()) throw std::logic_error("least squares: residual vector changed length");
    j.col(k) = (r - r0) / problem.step;
  }
  return j;
}

LeastSquaresResult solve_least_squares(const LeastSquaresProblem& problem, int max_iterations) {
  const int n = problem.parameters;
  LeastSquaresResult out;
  out.theta = Eigen::VectorXd::Zero(n);
  Eigen::VectorXd r = problem.residuals(out.theta);
  out.initial_cost = cost_of(problem, r, out.theta);
  double cost = out.initial_cost;
  double lambda = 1e-3;
  const double prior2 = problem.prior_weight * problem.prior_weight;
  Eigen::MatrixXd j = numeric_jacobian(problem, out.theta, r);
  for (out.iterations = 0; out.iterations < max_iterations; ++out.iterations) {
    // Normal equations of the augmented system [J; w I] d = -[r; w theta], damped on the
    // diagonal (Marquardt's scaling, so parameters of different sensitivity step alike).
    const Eigen::MatrixXd jtj = j.transpose() * j;
    const Eigen::VectorXd g = j.transpose() * r + prior2 * out.theta;
    bool improved = false;
    while (lambda < 1e12) {
      Eigen::MatrixXd a = jtj + prior2 * Eigen::MatrixXd::Identity(n, n);
      a.diagonal() += lambda * (jtj.diagonal().array() + prior2).matrix();
      const Eigen::VectorXd d = a.ldlt().solve(-g);
      const Eigen::VectorXd candidate = out.theta + d;
      const Eigen::VectorXd rc = problem.residuals(candidate);
      const double c = cost_of(problem, rc, candidate);
      if (c < cost) {
        const double decrease = (cost - c) / std::max(cost, 1e-300);
        out.theta = candidate;
        r = rc;
        cost = c;
        lambda = std::max(lambda / 10, 1e-12);
        improved = decrease > 1e-10;
        break;
      }
      lambda *= 10;
    }
    if (!improved) break;
    j = numeric_jacobian(problem, out.theta, r);
  }
  out.residuals = r;
  out.cost = cost;

  // Which parameters the data determine, and their standard errors from the final Jacobian.
  out.determined.assign(n, false);
  out.standard_error = Eigen::VectorXd::Zero(n);
  const double largest = n > 0 ? j.colwise().norm().maxCoeff() : 0;
  std::vector<int> used;
  for (int k = 0; k < n; ++k)
    if (largest > 0 && j.col(k).norm() > kUndetermined * largest) {
      out.determined[k] = true;
      used.push_back(k);
    }
  const int m = static_cast<int>(r.size());
  const int dof = m - static_cast<int>(used.size());
  if (!used.empty() && dof > 0) {
    Eigen::MatrixXd ju(m, used.size());
    for (std::size_t i = 0; i < used.size(); ++i) ju.col(i) = j.col(used[i]);
    const Eigen::MatrixXd cov = (ju.transpose() * ju).completeOrthogonalDecomposition().pseudoInverse() *
                                (r.squaredNorm() / dof);
    for (std::size_t i = 0; i < used.size(); ++i) out.standard_error[used[i]] = std::sqrt(std::max(0.0, cov(i, i)));
  }
  return out;
}

}  // namespace stepsim::validation
