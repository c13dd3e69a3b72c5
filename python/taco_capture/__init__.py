"""taco_capture: capture the tensors that tensor-parallel (TP) collectives carry, and write
them as taco traces (traces/README.md).

Modules (torch is needed only by the ones marked *):
  trace_writer   taco trace (HDF5) writer and reader, numpy + h5py
  safetensors_io safetensors writer and reader, numpy only
  tp *           Megatron-style ColumnParallelLinear / RowParallelLinear over torch.distributed,
                 with capture at each TP collective
  emulate *      single-process TP emulation: hooks on plain nn.Linear layers matched by name
  recorder *     what gets captured, and when
  model *        a small GPT (byte-level) built from either kind of layer
  train *        `python -m taco_capture.train`: train from scratch and capture
  selfcheck *    `python -m taco_capture.selfcheck`: emulation vs torch.distributed vs unsplit
  convert_pt *   `python -m taco_capture.convert_pt`: torch.save dumps -> safetensors / trace
  subset         `python -m taco_capture.subset`: pick tensors and rows out of traces
"""
__version__ = "0.1.0"
