"""taco.capture: capture the tensors that tensor-parallel (TP) collectives carry, and write them as
taco traces (traces/README.md).

Modules (torch is needed only by the ones marked *):
  trace_writer   taco trace (HDF5) writer and reader, numpy + h5py
  safetensors_io safetensors writer and reader, numpy only
  recorder *     what gets captured, and when (taco.tp's collectives and the emulator report to it)
  emulate *      single-process TP emulation: hooks on plain nn.Linear layers matched by name
  selfcheck *    `python -m taco.capture.selfcheck`: emulation vs simulated TP vs torch.distributed
                 vs the unsplit model
  convert_pt *   `python -m taco.capture.convert_pt`: torch.save dumps -> safetensors / trace
  subset         `python -m taco.capture.subset`: pick tensors and rows out of traces
Training runs that capture: `python -m taco.train --capture-steps ...` (taco.train).
"""
