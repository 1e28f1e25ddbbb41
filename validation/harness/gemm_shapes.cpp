#include "validation/harness/gemm_shapes.hpp"

#include "platforms/config_error.hpp"
#include "validation/harness/cli_args.hpp"

namespace stepsim::harness {

std::vector<GemmShape> default_gemm_shapes(bool quick) {
  std::vector<GemmShape> shapes;
  const int64_t last_square = quick ? 4096 : 16384;
  for (int64_t s = 256; s <= last_square; s *= quick ? 4 : 2)
    shapes.push_back({s, s, s, 1, "NN", "square " + std::to_string(s)});
  if (quick) return shapes;
  // Llama-3-8B (hidden 4096, 8 KV heads of 128, MLP 14336) at 16384 tokens per GPU.
  const int64_t tokens = 16384;
  struct Projection {
    int64_t out, in;
    const char* name;
  };
  const Projection projections[] = {{4096, 4096, "q/o"}, {1024, 4096, "k/v"}, {14336, 4096, "gate/up"}, {4096, 14336, "down"}};
  for (const Projection& p : projections) {
    const std::string label = std::string("llama3-8b ") + p.name;
    shapes.push_back({tokens, p.out, p.in, 1, "NT", label + " fwd"});
    shapes.push_back({tokens, p.in, p.out, 1, "NN", label + " dgrad"});
    shapes.push_back({p.out, p.in, tokens, 1, "TN", label + " wgrad"});
  }
  return shapes;
}

std::vector<GemmShape> parse_gemm_shapes(const std::string& text, const std::string& layout) {
  if (layout != "NN" && layout != "NT" && layout != "TN")
    throw ConfigError("--layout", "unknown layout '" + layout + "'", "use NN, NT or TN");
  std::vector<GemmShape> shapes;
  for (const std::string& item : split(text, ';')) {
    std::vector<std::string> parts = split(item, ',');
    if (parts.size() != 3 && parts.size() != 4)
      throw ConfigError("--shapes", "'" + item + "' is not m,n,k or m,n,k,batch", "write e.g. --shapes '4096,4096,4096;1024,1024,64,32'");
    int64_t values[4] = {0, 0, 0, 1};
    for (std::size_t i = 0; i < parts.size(); ++i) {
      values[i] = parse_integer(parts[i], "--shapes");
      if (values[i] < 1 || values[i] > 2147483647)
        throw ConfigError("--shapes", "'" + item + "': every number must be in [1, 2147483647]", "give positive dimensions");
    }
    shapes.push_back({values[0], values[1], values[2], values[3], layout, item});
  }
  return shapes;
}

CublasGemmCall cublas_call(const GemmShape& shape) {
  const bool a_transposed = shape.layout[0] == 'T';
  const bool b_transposed = shape.layout[1] == 'T';
  CublasGemmCall call;
  call.transpose_first = b_transposed;
  call.transpose_second = a_transposed;
  call.m = shape.n;
  call.n = shape.m;
  call.k = shape.k;
  // Row-major X[r x c] is column-major X^T[c x r] with leading dimension c.
  call.ld_first = b_transposed ? shape.k : shape.n;   // B stored n x k (T) or k x n (N)
  call.ld_second = a_transposed ? shape.m : shape.k;  // A stored k x m (T) or m x k (N)
  call.ld_c = shape.n;
  call.stride_first = shape.k * shape.n;
  call.stride_second = shape.m * shape.k;
  call.stride_c = shape.m * shape.n;
  return call;
}

double gemm_flops(const GemmShape& shape) {
  return 2.0 * static_cast<double>(shape.m) * static_cast<double>(shape.n) * static_cast<double>(shape.k) *
         static_cast<double>(shape.batch);
}

}  // namespace stepsim::harness
