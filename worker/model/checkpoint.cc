#include "worker/model/checkpoint.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/status_macros.h"
#include "worker/model/file_util.h"

namespace pkv {
namespace {

constexpr char kIndexName[] = "model.safetensors.index.json";
constexpr char kSingleName[] = "model.safetensors";

// A shard name must stay inside the model directory.
bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
}

}  // namespace

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& model_dir) {
  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  absl::StatusOr<std::string> index = ReadFileToString(JoinPath(model_dir, kIndexName));
  if (index.ok()) {
    PKV_RETURN_IF_ERROR(ckpt->OpenSharded(model_dir, *index));
    return ckpt;
  }
  if (!absl::IsNotFound(index.status())) return index.status();
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file =
      SafetensorsFile::Open(JoinPath(model_dir, kSingleName));
  if (absl::IsNotFound(file.status())) {
    return absl::NotFoundError(
        absl::StrCat(model_dir, ": neither ", kIndexName, " nor ", kSingleName, " found"));
  }
  if (!file.ok()) return file.status();
  for (const SafetensorsTensorInfo& t : (*file)->header().tensors) {
    ckpt->tensors_[t.name] = TensorView{&t, (*file)->Data(t)};
  }
  ckpt->files_.push_back(*std::move(file));
  return ckpt;
}

absl::Status Checkpoint::OpenSharded(const std::string& model_dir, const std::string& index_text) {
  const std::string ctx = JoinPath(model_dir, kIndexName);
  absl::StatusOr<JsonValue> root = ParseJson(index_text);
  if (!root.ok())
    return absl::InvalidArgumentError(absl::StrCat(ctx, ": ", root.status().message()));
  const JsonValue* map = root->Find("weight_map");
  if (map == nullptr || !map->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(ctx, ": 'weight_map' must be an object"));
  }
  absl::flat_hash_map<std::string, const SafetensorsFile*> shards;
  for (const auto& [name, file_name] : map->members()) {
    if (!file_name.is_string() || !IsPlainFileName(file_name.str())) {
      return absl::InvalidArgumentError(absl::StrCat(
          ctx, ": weight_map entry for '", name, "' must be a file name in the model directory"));
    }
    auto it = shards.find(file_name.str());
    if (it == shards.end()) {
      PKV_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file,
                           SafetensorsFile::Open(JoinPath(model_dir, file_name.str())));
      it = shards.emplace(file_name.str(), file.get()).first;
      files_.push_back(std::move(file));
    }
    const SafetensorsTensorInfo* info = it->second->Find(name);
    if (info == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(ctx, ": tensor '", name, "' is not in shard ", file_name.str()));
    }
    if (!tensors_.emplace(name, TensorView{info, it->second->Data(*info)}).second) {
      return absl::InvalidArgumentError(absl::StrCat(ctx, ": tensor '", name, "' is listed twice"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorView> Checkpoint::Get(std::string_view name) const {
  auto it = tensors_.find(absl::string_view(name.data(), name.size()));
  if (it == tensors_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint has no tensor '", absl::string_view(name.data(), name.size()), "'"));
  }
  return it->second;
}

bool Checkpoint::Contains(std::string_view name) const {
  return tensors_.contains(absl::string_view(name.data(), name.size()));
}

std::vector<std::string> Checkpoint::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, view] : tensors_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace pkv
