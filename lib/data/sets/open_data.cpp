// open_data (open_data.hpp): which reader each data.format takes.
#include "data/sets/open_data.hpp"

#include <algorithm>
#include <string>

#include "config/sagemaker_env.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "data/formats/data_files.hpp"
#include "data/formats/tfrecord.hpp"
#include "data/loading/stream_loader.hpp"
#include "data/sets/cifar10.hpp"
#include "data/sets/encoded_images.hpp"
#include "data/sets/mnist.hpp"
#include "data/sets/pipe_channel.hpp"
#include "data/sets/synthetic.hpp"

namespace sdp {

namespace {

// The data spec's keys of where a record keeps its image and label.
RecordFields record_fields(const DataSpec& d) {
  RecordFields f;
  f.image_key = d.image_key;
  f.label_key = d.label_key;
  f.label_offset = d.label_offset;
  return f;
}

// Gzip files have no offsets to read records by: such a set is streamed.
bool has_gzip_tfrecords(const std::string& path) {
  const std::vector<std::string> files = list_data_files(path, "data.format tfrecord");
  return std::any_of(files.begin(), files.end(), [](const std::string& f) { return tfrecord_is_gzip(f); });
}

// The set at `path` of a tfrecord, tar-shards or image-folder job: read by offset (plain
// TFRecords, image folders) or streamed (tar shards, gzip TFRecords).
std::unique_ptr<SampleSource> open_encoded_set(const DataSpec& d, const EncodedImageOptions& options,
                                               const std::string& path) {
  if (d.format == DataFormat::kImageFolder)
    return std::make_unique<EncodedImageSet>(open_image_folder_source(path), options);
  if (d.format == DataFormat::kTarShards || has_gzip_tfrecords(path)) {
    StreamSourceOptions stream;
    stream.format = d.format == DataFormat::kTarShards ? StreamFormat::kTarShards : StreamFormat::kTfRecord;
    static_cast<RecordFields&>(stream) = record_fields(d);
    return std::make_unique<StreamedImageSet>(std::make_shared<StreamSource>(path, stream), options,
                                              d.shuffle_buffer);
  }
  TfRecordSourceOptions tfrecord;
  static_cast<RecordFields&>(tfrecord) = record_fields(d);
  return std::make_unique<EncodedImageSet>(open_tfrecord_source(path, tfrecord), options);
}

// tfrecord, tar-shards and image-folder: sets of encoded images, decoded as batches are made;
// a training channel in SageMaker's Pipe mode is read from its FIFOs (pipe_channel.hpp).
DataSplits open_encoded_images(const DataSpec& d, const DataJob& job, const DataReaders& readers) {
  EncodedImageOptions options;
  options.image_size = d.image_size;
  options.resize = d.resize;
  options.num_classes = job.num_classes;
  options.workers = loader_workers(d, job.workers, static_cast<bool>(job.make_offload));
  options.batch_dtype = job.batch_dtype;
  options.batch_channels_last = job.batch_channels_last;
  options.normalize_on_offload = job.normalize_on_offload;
  options.skip_bad_records = d.on_bad_record == "skip";
  if (d.normalize == "cifar10") options.normalization = Normalization::cifar10();
  const auto train_channel = channel_config(d.train);
  const auto test_channel = channel_config(d.test);
  const bool train_pipe = train_channel && train_channel->input_mode == "Pipe";
  const bool test_pipe = test_channel && test_channel->input_mode == "Pipe";
  if ((train_pipe || test_pipe) && d.format == DataFormat::kImageFolder)
    throw InputError("key 'data.format': image-folder: a channel in Pipe mode (" + (train_pipe ? d.train : d.test) +
                     ") carries its files back to back, without their folders; use tfrecord or tar-shards "
                     "(sdp-train data convert makes them from an image folder)");
  // The channel at `path` read from its FIFOs: one reader per host deals the records.
  auto pipe_of = [&](const std::string& path, const ChannelConfig& channel) {
    StreamSourceOptions records;
    records.format = d.format == DataFormat::kTarShards ? StreamFormat::kTarShards : StreamFormat::kTfRecord;
    static_cast<RecordFields&>(records) = record_fields(d);
    return channel_pipe(path, channel, readers, job.timeout_s, records);
  };
  // Each loader its own offload (data.decode: gpu): the training and the evaluation loaders
  // may decode at the same time.
  EncodedImageOptions train_options = options, test_options = options;
  if (job.make_offload) {
    train_options.offload = job.make_offload();
    test_options.offload = job.make_offload();
  }
  std::unique_ptr<SampleSource> train;  // first: its errors are the ones reported
  if (train_pipe) {
    train = std::make_unique<PipeImageSet>(pipe_of(d.train, *train_channel), train_options, d.samples_per_epoch,
                                           d.shuffle_buffer, readers.rank, readers.size);
  } else {
    if (d.samples_per_epoch > 0 && readers.rank == 0)
      log_warn("key 'data.samples_per_epoch' is read only for a training channel in Pipe mode; " + d.train +
               " is counted instead");
    train = open_encoded_set(d, train_options, d.train);
  }
  std::unique_ptr<SampleSource> test = test_pipe ? PipeImageSet::for_evaluation(pipe_of(d.test, *test_channel), test_options)
                                                 : open_encoded_set(d, test_options, d.test);
  return {std::move(train), std::move(test)};
}

}  // namespace

PipeOptions channel_pipe(const std::string& path, const ChannelConfig& channel, const DataReaders& readers,
                         double timeout_s, const StreamSourceOptions& records) {
  PipeOptions pipe;
  pipe.path = path;
  pipe.local_rank = readers.local_rank;
  pipe.local_size = readers.local_size;
  pipe.host = readers.host;
  pipe.hosts = readers.hosts;
  pipe.host_sharded = channel.distribution == "ShardedByS3Key";
  pipe.token = readers.token;
  pipe.timeout_s = timeout_s;
  pipe.records = records;
  return pipe;
}

DataSplits open_data(const DataSpec& d, const DataJob& job, const DataReaders& readers) {
  if (is_encoded_images(d.format)) return open_encoded_images(d, job, readers);
  // The training split is read first, so that its errors are the ones reported.
  auto in_memory = [](Dataset train, Dataset test) {
    return DataSplits{std::make_unique<DatasetSamples>(std::move(train)),
                      std::make_unique<DatasetSamples>(std::move(test))};
  };
  if (d.format == DataFormat::kMnist) {
    Dataset train = load_mnist(d.train, Split::kTrain);
    return in_memory(std::move(train), load_mnist(d.test, Split::kTest));
  }
  if (d.format == DataFormat::kCifar10) {
    Dataset train = load_cifar10(d.train, Split::kTrain);
    return in_memory(std::move(train), load_cifar10(d.test, Split::kTest));
  }
  SyntheticSpec s;
  s.channels = d.synthetic.channels;
  s.height = d.synthetic.height;
  s.width = d.synthetic.width;
  s.num_classes = job.num_classes;
  s.seed = job.seed;
  s.noise = d.synthetic.noise;
  s.count = d.synthetic.train_samples;
  Dataset train = make_synthetic(s, Split::kTrain);
  s.count = d.synthetic.test_samples;
  return in_memory(std::move(train), make_synthetic(s, Split::kTest));
}

AugmentOptions augment_options(const DataSpec& data) {
  AugmentOptions options;
  // Encoded images: auto is ImageNet's RandomResizedCrop + flip; crop-flip and flip are CIFAR's.
  options.random_resized_crop = is_encoded_images(data.format) && data.augment == Augmentation::kAuto;
  options.enabled = data.augment == Augmentation::kCropFlip || data.augment == Augmentation::kFlip ||
                    (data.augment == Augmentation::kAuto && data.format == DataFormat::kCifar10) ||
                    (data.augment == Augmentation::kAuto && is_encoded_images(data.format));
  if (data.augment == Augmentation::kFlip) options.pad = 0;  // no crop: the image as is, or mirrored
  return options;
}

int loader_workers(const DataSpec& data, int compute_threads, bool gpu_decode) {
  if (data.workers > 0) return data.workers;
  const int threads = std::max(1, compute_threads);
  return gpu_decode ? std::min(kGpuDecodeWorkers, threads) : threads;
}

}  // namespace sdp
