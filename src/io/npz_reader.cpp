// NumPy .npz: a zip archive whose members are .npy files ("name.npy" -> tensor "name").
// Members may be stored or deflated; zip64 records are followed for large archives. The
// central directory is trusted only after it is checked against the file, and a member is
// inflated only when its tensor is read (the header is inflated at open for info()).
#include "core/error.hpp"
#include "io/npy_read.hpp"
#include "io/readers.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <set>

namespace taco {
namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50, kZip64LocatorSig = 0x07064b50;
constexpr size_t kEndSize = 22, kCentralSize = 46, kLocalSize = 30, kZip64EndSize = 56,
                 kZip64LocatorSize = 20;
constexpr uint16_t kStored = 0, kDeflated = 8;

struct Member {
  std::string zip_name;  // as in the archive
  std::string what;      // "<file>: member '<name>'" for messages
  uint16_t method = 0;
  uint32_t crc = 0;
  uint64_t comp_size = 0, uncomp_size = 0;
  uint64_t data_begin = 0;  // absolute offset of the (compressed) data
  NpyHeader header;
};

// zlib counts in uInt; feed it at most this much at a time.
constexpr size_t kZlibStep = size_t(1) << 30;

uint32_t crc_update(uint32_t crc, const uint8_t* p, size_t n) {
  while (n > 0) {
    const size_t step = std::min(n, kZlibStep);
    crc = uint32_t(crc32(crc, p, uInt(step)));
    p += step;
    n -= step;
  }
  return crc;
}

// The uncompressed bytes of a member, in order, with their CRC-32 accumulated; finish()
// checks that exactly uncomp_size bytes were there and that the CRC matches.
class MemberStream final : public ByteStream {
 public:
  MemberStream(const ByteSource& src, const Member& m) : src_(src), m_(m) {
    if (m_.method == kDeflated) {
      if (inflateInit2(&z_, -MAX_WBITS) != Z_OK)
        throw std::bad_alloc();  // raw deflate, no zlib header
      z_open_ = true;
    }
  }
  ~MemberStream() override {
    if (z_open_) inflateEnd(&z_);
  }
  MemberStream(const MemberStream&) = delete;
  MemberStream& operator=(const MemberStream&) = delete;

  void read(void* dst, size_t n) override {
    TACO_REQUIRE_INPUT(n <= m_.uncomp_size - produced_,
                       "{}: truncated: the member ends after {} bytes", m_.what, m_.uncomp_size);
    auto* out = static_cast<uint8_t*>(dst);
    if (m_.method == kStored) {
      src_.read_at(m_.data_begin + produced_, out, n);
    } else {
      inflate_into(out, n);
    }
    crc_ = crc_update(crc_, out, n);
    produced_ += n;
  }

  // All bytes were consumed: the deflate stream must end here, and the CRC must match.
  void finish() {
    TACO_ASSERT(produced_ == m_.uncomp_size, "member read {} of {} bytes", produced_,
                m_.uncomp_size);
    if (m_.method == kDeflated && !ended_) {
      uint8_t extra;
      z_.next_out = &extra;
      z_.avail_out = 1;
      const int rc = step();
      TACO_REQUIRE_INPUT(rc == Z_STREAM_END && z_.avail_out == 1,
                         "{}: deflate data holds more than the declared {} bytes", m_.what,
                         m_.uncomp_size);
    }
    TACO_REQUIRE_INPUT(crc_ == m_.crc,
                       "{}: CRC mismatch (computed {:08x}, the archive says {:08x}): corrupt data",
                       m_.what, crc_, m_.crc);
  }

 private:
  void inflate_into(uint8_t* out, size_t n) {
    while (n > 0) {
      TACO_REQUIRE_INPUT(!ended_, "{}: deflate data ends before the {} bytes the archive declares",
                         m_.what, m_.uncomp_size);
      const size_t want = std::min(n, kZlibStep);
      z_.next_out = out;
      z_.avail_out = uInt(want);
      step();
      const size_t got = want - z_.avail_out;
      out += got;
      n -= got;
    }
  }

  // One inflate() call, refilling the input first when it ran dry.
  int step() {
    if (z_.avail_in == 0 && consumed_ < m_.comp_size) {
      // Small first read: opening an archive inflates only each member's npy header.
      const uint64_t limit = consumed_ == 0 ? kFirstInputChunk : kInputChunk;
      const size_t chunk = size_t(std::min<uint64_t>(m_.comp_size - consumed_, limit));
      in_.resize(chunk);
      src_.read_at(m_.data_begin + consumed_, in_.data(), chunk);
      consumed_ += chunk;
      z_.next_in = in_.data();
      z_.avail_in = uInt(chunk);
    }
    const uInt out_before = z_.avail_out;
    const int rc = inflate(&z_, Z_NO_FLUSH);
    switch (rc) {
      case Z_OK:
        return rc;
      case Z_STREAM_END:
        ended_ = true;
        return rc;
      case Z_BUF_ERROR:  // no progress possible: the input is exhausted
        TACO_REQUIRE_INPUT(
            !(z_.avail_in == 0 && consumed_ == m_.comp_size && z_.avail_out == out_before),
            "{}: truncated deflate data (the compressed bytes end too early)", m_.what);
        return rc;
      case Z_MEM_ERROR:
        throw std::bad_alloc();
      case Z_DATA_ERROR:
      case Z_NEED_DICT:
      case Z_STREAM_ERROR:
        throw_input_error("{}: corrupted deflate data ({})", m_.what,
                          z_.msg ? printable(z_.msg) : "zlib error");
      default:
        throw_input_error("{}: corrupted deflate data (zlib code {})", m_.what, rc);
    }
  }

  static constexpr uint64_t kFirstInputChunk = uint64_t(1) << 14, kInputChunk = uint64_t(1) << 20;
  const ByteSource& src_;
  const Member& m_;
  z_stream z_{};
  bool z_open_ = false, ended_ = false;
  std::vector<uint8_t> in_;
  uint64_t consumed_ = 0, produced_ = 0;
  uint32_t crc_ = 0;
};

class NpzSource final : public TensorSource {
 public:
  NpzSource(std::shared_ptr<ByteSource> src, std::vector<Member> members, const OpenOptions& opts)
      : src_(std::move(src)), members_(std::move(members)), opts_(opts) {}

  const std::string& path() const override { return src_->name(); }
  std::string format() const override { return "npz"; }
  size_t size() const override { return members_.size(); }
  TensorInfo info(size_t i) const override {
    TACO_ASSERT(i < members_.size(), "tensor index {} of {}", i, members_.size());
    TensorInfo t;
    t.name = tensor_name(members_[i]);
    t.dtype = members_[i].header.dtype;
    t.shape = members_[i].header.shape;
    return t;
  }
  Tensor read(size_t i) override {
    TACO_ASSERT(i < members_.size(), "tensor index {} of {}", i, members_.size());
    const Member& m = members_[i];
    MemberStream in(*src_, m);
    const NpyHeader h = read_npy_header(in, m.uncomp_size, opts_, m.what);
    Tensor t;
    t.name = tensor_name(m);
    t.dtype = h.dtype;
    t.shape = h.shape;
    t.values = read_npy_values(in, h);
    in.finish();
    return t;
  }

 private:
  static std::string tensor_name(const Member& m) {
    const std::string& n = m.zip_name;
    return n.size() > 4 && n.compare(n.size() - 4, 4, ".npy") == 0 ? n.substr(0, n.size() - 4) : n;
  }
  std::shared_ptr<ByteSource> src_;
  std::vector<Member> members_;
  OpenOptions opts_;
};

// Where the central directory is, from the end record (and the zip64 end record if present).
struct Directory {
  uint64_t entries = 0, offset = 0, size = 0;
};

Directory find_directory(const ByteSource& src) {
  const std::string& path = src.name();
  const uint64_t size = src.size();
  TACO_REQUIRE_INPUT(size >= kEndSize, "{}: truncated zip archive ({} bytes)", path, size);
  // The end record is in the last 22 + 65535 (the longest comment) bytes; search backwards.
  const auto tail_len = size_t(std::min<uint64_t>(size, kEndSize + 0xffff));
  std::vector<uint8_t> tail(tail_len);
  src.read_at(size - tail_len, tail.data(), tail_len);
  size_t end_at = tail_len;
  for (size_t i = tail_len - kEndSize + 1; i-- > 0;) {
    if (load_le32(&tail[i]) == kEndSig && i + kEndSize + load_le16(&tail[i + 20]) <= tail_len) {
      end_at = i;
      break;
    }
  }
  TACO_REQUIRE_INPUT(end_at < tail_len,
                     "{}: truncated or corrupt zip archive (no end-of-central-directory record)",
                     path);
  const uint8_t* e = &tail[end_at];
  const uint64_t end_offset = size - tail_len + end_at;
  uint64_t disk = load_le16(e + 4), dir_disk = load_le16(e + 6), entries_here = load_le16(e + 8);
  Directory d{load_le16(e + 10), load_le32(e + 16), load_le32(e + 12)};
  uint64_t dir_limit = end_offset;  // the directory ends before the end record(s)

  if (end_offset >= kZip64LocatorSize) {
    uint8_t loc[kZip64LocatorSize];
    src.read_at(end_offset - kZip64LocatorSize, loc, sizeof loc);
    if (load_le32(loc) == kZip64LocatorSig) {
      const uint64_t z64_at = load_le64(loc + 8);
      TACO_REQUIRE_INPUT(load_le32(loc + 4) == 0 && load_le32(loc + 16) <= 1,
                         "{}: multi-volume zip archives are not supported", path);
      TACO_REQUIRE_INPUT(end_offset - kZip64LocatorSize >= kZip64EndSize &&
                             z64_at <= end_offset - kZip64LocatorSize - kZip64EndSize,
                         "{}: corrupt zip archive (zip64 end record offset {} is out of range)",
                         path, z64_at);
      uint8_t z[kZip64EndSize];
      src.read_at(z64_at, z, sizeof z);
      TACO_REQUIRE_INPUT(load_le32(z) == kZip64EndSig,
                         "{}: corrupt zip archive (bad zip64 end record)", path);
      disk = load_le32(z + 16);
      dir_disk = load_le32(z + 20);
      entries_here = load_le64(z + 24);
      d = Directory{load_le64(z + 32), load_le64(z + 48), load_le64(z + 40)};
      dir_limit = z64_at;
    }
  }
  TACO_REQUIRE_INPUT(disk == 0 && dir_disk == 0 && entries_here == d.entries,
                     "{}: multi-volume zip archives are not supported", path);
  TACO_REQUIRE_INPUT(
      d.offset <= dir_limit && d.size <= dir_limit - d.offset,
      "{}: truncated or corrupt zip archive (central directory at {} + {} bytes lies outside the "
      "{} bytes before its end record)",
      path, d.offset, d.size, dir_limit);
  TACO_REQUIRE_INPUT(
      d.entries <= d.size / kCentralSize,
      "{}: corrupt zip archive ({} entries cannot fit in a {}-byte central directory)", path,
      d.entries, d.size);
  return d;
}

// Replaces 0xffffffff sizes/offset with their zip64 values from the extra field (id 1).
void apply_zip64_extra(const uint8_t* extra, size_t len, uint64_t& uncomp, uint64_t& comp,
                       uint64_t& local, const std::string& what) {
  const bool need_uncomp = uncomp == 0xffffffffu, need_comp = comp == 0xffffffffu,
             need_local = local == 0xffffffffu;
  if (!need_uncomp && !need_comp && !need_local) return;
  for (size_t x = 0; x + 4 <= len;) {
    const uint16_t id = load_le16(extra + x), sz = load_le16(extra + x + 2);
    TACO_REQUIRE_INPUT(x + 4 + sz <= len, "{}: corrupt zip extra field", what);
    if (id == 1) {
      const uint8_t* q = extra + x + 4;
      const size_t needed = 8 * (size_t(need_uncomp) + size_t(need_comp) + size_t(need_local));
      TACO_REQUIRE_INPUT(sz >= needed, "{}: zip64 extra field is too short", what);
      if (need_uncomp) {
        uncomp = load_le64(q);
        q += 8;
      }
      if (need_comp) {
        comp = load_le64(q);
        q += 8;
      }
      if (need_local) local = load_le64(q);
      return;
    }
    x += 4 + size_t(sz);
  }
  throw_input_error("{}: sizes need a zip64 extra field but there is none", what);
}

}  // namespace

std::unique_ptr<TensorSource> open_npz(std::shared_ptr<ByteSource> src, const OpenOptions& opts) {
  const std::string& path = src->name();
  const Directory dir = find_directory(*src);
  std::vector<uint8_t> cd(size_t(dir.size));
  src->read_at(dir.offset, cd.data(), cd.size());

  std::vector<Member> members;
  std::set<std::string> names;
  size_t pos = 0;
  for (uint64_t k = 0; k < dir.entries; ++k) {
    TACO_REQUIRE_INPUT(cd.size() - pos >= kCentralSize, "{}: truncated zip central directory",
                       path);
    const uint8_t* p = cd.data() + pos;
    TACO_REQUIRE_INPUT(load_le32(p) == kCentralSig, "{}: corrupt zip central directory (entry {})",
                       path, k);
    const uint16_t flags = load_le16(p + 8), method = load_le16(p + 10),
                   disk_start = load_le16(p + 34);
    const size_t name_len = load_le16(p + 28), extra_len = load_le16(p + 30),
                 comment_len = load_le16(p + 32);
    TACO_REQUIRE_INPUT(cd.size() - pos - kCentralSize >= name_len + extra_len + comment_len,
                       "{}: truncated zip central directory (entry {})", path, k);
    Member m;
    m.zip_name.assign(reinterpret_cast<const char*>(p + kCentralSize), name_len);
    m.what = fmt::format("{}: member '{}'", path, printable(m.zip_name));
    m.method = method;
    m.crc = load_le32(p + 16);
    m.comp_size = load_le32(p + 20);
    m.uncomp_size = load_le32(p + 24);
    uint64_t local = load_le32(p + 42);
    apply_zip64_extra(p + kCentralSize + name_len, extra_len, m.uncomp_size, m.comp_size, local,
                      m.what);
    pos += kCentralSize + name_len + extra_len + comment_len;

    if (!m.zip_name.empty() && m.zip_name.back() == '/') continue;  // a directory entry
    TACO_REQUIRE_INPUT(!(flags & 1), "{}: encrypted members are not supported", m.what);
    TACO_REQUIRE_INPUT(disk_start == 0, "{}: multi-volume zip archives are not supported", m.what);
    TACO_REQUIRE_INPUT(
        method == kStored || method == kDeflated,
        "{}: unsupported zip compression method {} (taco reads stored and deflated members)",
        m.what, method);
    if (method == kStored)
      TACO_REQUIRE_INPUT(m.comp_size == m.uncomp_size,
                         "{}: stored member has {} compressed but {} plain bytes", m.what,
                         m.comp_size, m.uncomp_size);
    else
      TACO_REQUIRE_INPUT(m.uncomp_size <= m.comp_size * kMaxDeflateRatio + 64,
                         "{}: claims {} bytes from {} deflated bytes, beyond what deflate can "
                         "encode: corrupt archive",
                         m.what, m.uncomp_size, m.comp_size);

    TACO_REQUIRE_INPUT(local <= dir.offset && dir.offset - local >= kLocalSize,
                       "{}: local header offset {} is outside the archive's data", m.what, local);
    uint8_t lh[kLocalSize];
    src->read_at(local, lh, sizeof lh);
    TACO_REQUIRE_INPUT(load_le32(lh) == kLocalSig, "{}: corrupt zip local header", m.what);
    m.data_begin = local + kLocalSize + load_le16(lh + 26) + load_le16(lh + 28);
    TACO_REQUIRE_INPUT(
        m.data_begin <= dir.offset && m.comp_size <= dir.offset - m.data_begin,
        "{}: truncated archive: member data [{}, {}) runs into the central directory at {}", m.what,
        m.data_begin, m.data_begin + m.comp_size, dir.offset);
    TACO_REQUIRE_INPUT(names.insert(m.zip_name).second, "{}: the archive holds this member twice",
                       m.what);

    MemberStream in(*src, m);
    m.header = read_npy_header(in, m.uncomp_size, opts, m.what);
    check_expansion(m.header.numel, m.comp_size, m.what);
    members.push_back(std::move(m));
  }
  TACO_REQUIRE_INPUT(!members.empty(), "{}: npz archive holds no tensors", path);
  return std::make_unique<NpzSource>(std::move(src), std::move(members), opts);
}

}  // namespace taco
