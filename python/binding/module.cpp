// taco._C: the Python binding of the codecs (tensor_codec.hpp). Arrays arrive through DLPack
// (numpy, torch, CuPy, JAX ...), so the module links against no framework; the Python package
// (python/taco/codec.py) allocates outputs and passes the caller's CUDA stream.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>

#include "core/error.hpp"
#include "core/version.hpp"
#include "tensor_codec.hpp"

namespace nb = nanobind;
using taco::DType;
using taco::py::Buf;
using taco::py::Shape;
using taco::py::TensorCodec;

namespace {

DType dtype_of(const nb::ndarray<>& a, const char* what) {
  const auto d = a.dtype();
  using C = nb::dlpack::dtype_code;
  if (d.lanes == 1) {
    if (d.code == uint8_t(C::Float) && d.bits == 32) return DType::F32;
    if (d.code == uint8_t(C::Bfloat) && d.bits == 16) return DType::BF16;
    if (d.code == uint8_t(C::Float) && d.bits == 16) return DType::F16;
    if (d.code == uint8_t(C::UInt) && d.bits == 8) return DType::U8;
  }
  throw nb::type_error((std::string(what) +
                        ": dtype must be float32, bfloat16 or float16 (uint8 for wires), got "
                        "DLPack code " +
                        std::to_string(d.code) + " with " + std::to_string(d.bits) + " bits")
                           .c_str());
}

Buf to_buf(const nb::ndarray<>& a, const char* what) {
  Buf b;
  b.dtype = dtype_of(a, what);
  int64_t expect = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    const int64_t n = int64_t(a.shape(i));
    if (n != 1 && a.stride_ptr() && a.stride(i) != expect)
      throw nb::value_error(
          (std::string(what) + ": the array is not contiguous (call .contiguous() first)").c_str());
    expect *= n;
  }
  b.numel = int64_t(a.size());
  b.data = a.data();
  if (a.device_type() == nb::device::cpu::value)
    b.device = -1;
  else if (a.device_type() == nb::device::cuda::value)
    b.device = a.device_id();
  else
    throw nb::type_error(
        (std::string(what) + ": arrays must live on the CPU or a CUDA device").c_str());
  return b;
}

// An argument: a DLPack array, or (for torch tensors, checked by taco.codec) the tuple
// (data pointer, dtype code (dtype_codes: taco::DType's values), numel, device: -1 CPU or the CUDA
// ordinal), which skips the DLPack export (a few microseconds a tensor).
Buf arg(nb::handle h, const char* what) {
  if (nb::isinstance<nb::tuple>(h)) {
    const auto t = nb::borrow<nb::tuple>(h);
    if (t.size() != 4)
      throw nb::value_error(
          (std::string(what) + ": a raw buffer is (ptr, dtype, numel, device)").c_str());
    Buf b;
    b.data = reinterpret_cast<void*>(nb::cast<uintptr_t>(t[0]));
    const int code = nb::cast<int>(t[1]);
    if (code != int(DType::F32) && code != int(DType::BF16) && code != int(DType::F16) &&
        code != int(DType::U8))
      throw nb::type_error((std::string(what) + ": bad dtype code").c_str());
    b.dtype = DType(code);
    b.numel = nb::cast<int64_t>(t[2]);
    b.device = nb::cast<int>(t[3]);
    return b;
  }
  nb::ndarray<> a;
  if (!nb::try_cast(h, a, false))
    throw nb::type_error(
        (std::string(what) + ": expected a DLPack array (numpy, torch, ...)").c_str());
  return to_buf(a, what);
}

std::vector<Buf> args(nb::handle seq, const char* what) {
  std::vector<Buf> out;
  for (nb::handle h : seq) out.push_back(arg(h, what));
  return out;
}

Shape shape(int64_t chunks, int64_t rows, int64_t cols) {
  return Shape{chunks, rows, cols};
}

// A plan as Python data for taco.dist's executor: a dict of the plan's sizes and its pieces, each
// a list of steps (comm, ops); an op is (kind, rows, cols, count, srcs, src_stride, dst_stride,
// dst, peer, bytes) with references (buffer, offset), buffers numbered In 0, Out 1, W0..W3 2..5.
const char* op_kind_name(taco::comm::Op::Kind k) {
  using K = taco::comm::Op::Kind;
  switch (k) {
    case K::Encode:
      return "encode";
    case K::Decode:
      return "decode";
    case K::DecodeReduceEncode:
      return "decode_reduce_encode";
    case K::DecodeAddEncode:
      return "decode_add_encode";
    case K::Copy:
      return "copy";
    case K::Send:
      return "send";
    case K::Recv:
      return "recv";
    case K::AllGather:
      return "all_gather";
  }
  taco::throw_error("op_kind_name: unknown op kind {}", int(k));
}

nb::tuple ref_tuple(const taco::comm::Ref& r) {
  return nb::make_tuple(int(r.buf), r.off);
}

nb::dict plan_dict(const taco::comm::RankPlan& p) {
  nb::list pieces;
  for (const auto& piece : p.pieces) {
    nb::list steps;
    for (const auto& step : piece) {
      nb::list ops;
      for (const auto& o : step.ops) {
        nb::list srcs;
        for (const auto& r : o.srcs) srcs.append(ref_tuple(r));
        ops.append(nb::make_tuple(op_kind_name(o.kind), o.rows, o.cols, o.count, nb::tuple(srcs),
                                  o.src_stride, o.dst_stride, ref_tuple(o.dst), o.peer, o.bytes));
      }
      steps.append(nb::make_tuple(step.comm, nb::tuple(ops)));
    }
    pieces.append(nb::tuple(steps));
  }
  nb::dict d;
  d["coll"] = std::string(taco::coll_name(p.coll));
  d["algo"] = std::string(taco::algo_name(p.algo));
  d["rank"] = p.rank;
  d["nranks"] = p.nranks;
  d["in_elems"] = p.in_elems;
  d["out_elems"] = p.out_elems;
  d["out_offset"] = p.out_offset;
  d["wire_size"] = nb::make_tuple(p.wire_size[0], p.wire_size[1], p.wire_size[2], p.wire_size[3]);
  d["wire_bytes"] = p.wire_bytes;
  d["bytes_sent"] = p.bytes_sent;
  d["quantizations"] = p.quantizations;
  d["pieces"] = nb::tuple(pieces);
  return d;
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() =
      "taco's codecs on DLPack arrays (CPU reference and CUDA kernels); use taco.codec instead";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const taco::InputError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const taco::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
  m.attr("version") = taco::kVersion;
  // The dtype codes of the (ptr, dtype, numel, device) argument form: taco::DType's values.
  nb::dict codes;
  codes["float32"] = int(taco::DType::F32);
  codes["bfloat16"] = int(taco::DType::BF16);
  codes["float16"] = int(taco::DType::F16);
  codes["uint8"] = int(taco::DType::U8);
  m.attr("dtype_codes") = codes;
  m.attr("git_commit") = taco::kGitCommit;
  m.attr("gpu_backend") = taco::py::gpu_backend_built();

  nb::class_<TensorCodec>(m, "Codec")
      .def(nb::init<const std::string&>(), nb::arg("variant"))
      .def_prop_ro("name", &TensorCodec::name)
      .def_prop_ro("feedback", &TensorCodec::feedback)
      .def_prop_ro("gpu_unsupported_reason", &TensorCodec::gpu_unsupported_reason)
      .def("params_json", [](const TensorCodec& c) { return c.params().dump(); })
      .def("layout_json", [](const TensorCodec& c, int64_t rows,
                             int64_t cols) { return c.layout(rows, cols).dump(); })
      .def("chunk_bytes", &TensorCodec::chunk_bytes, nb::arg("rows"), nb::arg("cols"))
      .def("range",
           [](const TensorCodec& c) -> nb::object {
             taco::CodecRange r;
             if (!c.range(r)) return nb::none();
             return nb::make_tuple(r.lo, r.hi, r.rel_lo);
           })
      .def(
          "out_of_range",
          [](const TensorCodec& c, nb::handle x, int64_t chunks, int64_t rows, int64_t cols) {
            return c.out_of_range(arg(x, "input"), shape(chunks, rows, cols));
          },
          nb::arg("x"), nb::arg("chunks"), nb::arg("rows"), nb::arg("cols"))
      .def(
          "encode",
          [](const TensorCodec& c, nb::handle x, nb::handle wire, int64_t chunks, int64_t rows,
             int64_t cols, uintptr_t stream) {
            c.encode(arg(x, "input"), shape(chunks, rows, cols), arg(wire, "wire"), stream);
          },
          nb::arg("x"), nb::arg("wire"), nb::arg("chunks"), nb::arg("rows"), nb::arg("cols"),
          nb::arg("stream") = 0)
      .def(
          "decode_reduce",
          [](const TensorCodec& c, nb::handle wires, nb::handle out, int64_t chunks, int64_t rows,
             int64_t cols, uintptr_t stream) {
            c.decode_reduce(args(wires, "wire"), shape(chunks, rows, cols), arg(out, "output"),
                            stream);
          },
          nb::arg("wires"), nb::arg("out"), nb::arg("chunks"), nb::arg("rows"), nb::arg("cols"),
          nb::arg("stream") = 0)
      .def(
          "decode_reduce_encode",
          [](const TensorCodec& c, nb::handle wires, nb::handle wire_out, int64_t chunks,
             int64_t rows, int64_t cols, uintptr_t stream) {
            c.decode_reduce_encode(args(wires, "wire"), shape(chunks, rows, cols),
                                   arg(wire_out, "wire_out"), stream);
          },
          nb::arg("wires"), nb::arg("wire_out"), nb::arg("chunks"), nb::arg("rows"),
          nb::arg("cols"), nb::arg("stream") = 0)
      .def(
          "decode_add_encode",
          [](const TensorCodec& c, nb::handle wire_in, nb::handle own, nb::handle wire_out,
             int64_t rows, int64_t cols, uintptr_t stream) {
            c.decode_add_encode(arg(wire_in, "wire_in"), arg(own, "own"), rows, cols,
                                arg(wire_out, "wire_out"), stream);
          },
          nb::arg("wire_in"), nb::arg("own"), nb::arg("wire_out"), nb::arg("rows"), nb::arg("cols"),
          nb::arg("stream") = 0)
      .def(
          "encode_ef",
          [](const TensorCodec& c, nb::handle x, nb::handle residual, nb::handle wire,
             int64_t chunks, int64_t rows, int64_t cols, uintptr_t stream) {
            c.encode_ef(arg(x, "input"), arg(residual, "residual"), shape(chunks, rows, cols),
                        arg(wire, "wire"), stream);
          },
          nb::arg("x"), nb::arg("residual"), nb::arg("wire"), nb::arg("chunks"), nb::arg("rows"),
          nb::arg("cols"), nb::arg("stream") = 0);

  m.def("variants", [] {
    nb::list out;
    for (const auto& v : taco::py::variant_infos()) {
      nb::dict d;
      d["name"] = v.name;
      d["definition"] = v.definition;
      d["description"] = v.description;
      d["gpu"] = v.gpu;
      out.append(d);
    }
    return out;
  });

  m.def(
      "collective_plan",
      [](const TensorCodec& c, const std::string& coll, const std::string& algo, int nranks,
         int rank, int64_t rows, int64_t cols, int64_t elem_bytes) {
        return plan_dict(
            taco::py::collective_plan(c, coll, algo, nranks, rank, rows, cols, elem_bytes));
      },
      nb::arg("codec"), nb::arg("coll"), nb::arg("algo"), nb::arg("nranks"), nb::arg("rank"),
      nb::arg("rows"), nb::arg("cols"), nb::arg("elem_bytes"));
  // sim::chunk_layout: [(element offset, rows, cols)] of the N chunks of a [rows, cols] buffer.
  m.def(
      "chunk_layout",
      [](int64_t rows, int64_t cols, int nranks) {
        TACO_REQUIRE_INPUT(rows >= 1 && cols >= 1 && nranks >= 1,
                           "chunk_layout: [{}, {}] over {} ranks", rows, cols, nranks);
        nb::list out;
        for (const auto& c : taco::sim::chunk_layout(rows, cols, nranks))
          out.append(nb::make_tuple(c.offset, c.rows, c.cols));
        return out;
      },
      nb::arg("rows"), nb::arg("cols"), nb::arg("nranks"));
  // The all-reduce algorithm "auto" picks for a per-rank buffer of `nbytes` (as `taco comm`).
  m.def(
      "auto_allreduce_algo",
      [](double nbytes, int nranks) {
        return std::string(taco::algo_name(taco::auto_allreduce_algo(nbytes, nranks)));
      },
      nb::arg("nbytes"), nb::arg("nranks"));

  m.def(
      "simulate_collective",
      [](const std::string& variant, const std::string& algorithm,
         std::vector<nb::ndarray<>> inputs, int64_t rows, int64_t cols) {
        std::vector<const float*> ptrs;
        for (const auto& a : inputs) {
          const Buf b = to_buf(a, "input");
          if (b.dtype != DType::F32 || b.device != -1 || b.numel != rows * cols)
            throw nb::value_error(
                "simulate_collective: inputs must be host float32 arrays of rows * cols elements");
          ptrs.push_back(static_cast<const float*>(b.data));
        }
        auto outs = taco::py::simulate_collective(variant, algorithm, ptrs, rows, cols);
        nb::list res;
        for (auto& o : outs) {
          auto* heap = new std::vector<float>(std::move(o));
          nb::capsule owner(heap,
                            [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
          res.append(
              nb::ndarray<nb::numpy, float, nb::ndim<1>>(heap->data(), {heap->size()}, owner));
        }
        return res;
      },
      nb::arg("variant"), nb::arg("algorithm"), nb::arg("inputs"), nb::arg("rows"),
      nb::arg("cols"));
}
