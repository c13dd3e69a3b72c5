#pragma once
// The files behind the inputs a command was given: a file stands for itself; a directory for
// the tensor files under it. The rule for a directory: walk it recursively, skip entries whose
// name starts with '.', do not follow links to directories (no loops), and take regular files
// (or links to them) named *.h5, *.hdf5, *.hdf, *.safetensors, *.npy or *.npz (any case), in
// natural order of their paths ("rank2" before "rank10"). Each is then read by its content.
#include <string>
#include <vector>

namespace taco {

struct InputFile {
  std::string path;    // the file to open
  std::string source;  // the input argument it came from (the directory, or the file itself)
};

// InputError for a missing path or a directory holding no tensor file.
std::vector<InputFile> expand_inputs(const std::vector<std::string>& inputs);

// "layers.2" before "layers.10": runs of digits compare as numbers.
bool natural_less(const std::string& a, const std::string& b);

}  // namespace taco
