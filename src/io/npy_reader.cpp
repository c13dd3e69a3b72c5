// A standalone .npy file: one tensor, named after the file (without directory and ".npy").
#include "core/error.hpp"
#include "io/npy_read.hpp"
#include "io/readers.hpp"

#include <filesystem>

namespace taco {
namespace {

// The bytes of a ByteSource from `begin`, in order.
class SourceStream final : public ByteStream {
 public:
  SourceStream(const ByteSource& src, uint64_t begin) : src_(src), pos_(begin) {}
  void read(void* dst, size_t n) override {
    src_.read_at(pos_, dst, n);
    pos_ += n;
  }

 private:
  const ByteSource& src_;
  uint64_t pos_;
};

class NpySource final : public TensorSource {
 public:
  NpySource(std::shared_ptr<ByteSource> src, NpyHeader header)
      : src_(std::move(src)), header_(std::move(header)) {
    std::filesystem::path p(src_->name());
    name_ = p.extension() == ".npy" ? p.stem().string() : p.filename().string();
  }

  const std::string& path() const override { return src_->name(); }
  std::string format() const override { return "npy"; }
  size_t size() const override { return 1; }
  TensorInfo info(size_t i) const override {
    TACO_ASSERT(i == 0, "tensor index {} of 1", i);
    TensorInfo t;
    t.name = name_;
    t.dtype = header_.dtype;
    t.shape = header_.shape;
    return t;
  }
  Tensor read(size_t i) override {
    TACO_ASSERT(i == 0, "tensor index {} of 1", i);
    Tensor t;
    t.name = name_;
    t.dtype = header_.dtype;
    t.shape = header_.shape;
    SourceStream in(*src_, header_.header_bytes);
    t.values = read_npy_values(in, header_);
    return t;
  }

 private:
  std::shared_ptr<ByteSource> src_;
  NpyHeader header_;
  std::string name_;
};

}  // namespace

std::unique_ptr<TensorSource> open_npy(std::shared_ptr<ByteSource> src, const OpenOptions& opts) {
  SourceStream in(*src, 0);
  NpyHeader h = read_npy_header(in, src->size(), opts, src->name());
  return std::make_unique<NpySource>(std::move(src), std::move(h));
}

}  // namespace taco
