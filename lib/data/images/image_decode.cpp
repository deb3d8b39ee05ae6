#include "data/images/image_decode.hpp"

// jpeglib.h needs size_t and FILE declared before it.
#include <jerror.h>
#include <jpeglib.h>
#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "core/error.hpp"

namespace sdp {
namespace {

// The C libraries report errors by calling us back; we longjmp out of them. Every function
// below that calls setjmp holds only trivially destructible locals, so the jump skips no
// destructor; the C++ objects (buffers, guards) live in their callers.

constexpr uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
// A progressive JPEG may have any number of scans, each a pass over the whole image: a few
// kilobytes can cost minutes. TurboJPEG's TJFLAG_LIMITSCANS uses the same bound.
constexpr int kMaxJpegScans = 500;

bool is_png(const uint8_t* data, size_t size) {
  return size >= 8 && std::memcmp(data, kPngSignature, 8) == 0;
}
bool is_jpeg(const uint8_t* data, size_t size) {
  return size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff;
}

void check_dimensions(int64_t width, int64_t height, const std::string& what) {
  if (width <= 0 || height <= 0)
    throw InputError(what + ": image has no pixels (" + std::to_string(width) + "x" +
                     std::to_string(height) + ")");
  // Each side first: a PNG side may be up to 2^32 - 1, and the product of two would overflow.
  if (width > kMaxImagePixels || height > kMaxImagePixels || width * height > kMaxImagePixels)
    throw InputError(what + ": image of " + std::to_string(width) + "x" + std::to_string(height) +
                     " pixels is larger than the limit of " + std::to_string(kMaxImagePixels) +
                     " pixels");
}

[[noreturn]] void throw_not_an_image(const std::string& what) {
  throw InputError(what + ": not a JPEG or PNG image (no JPEG or PNG signature)");
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

ImageInfo png_info(const uint8_t* data, size_t size, const std::string& what) {
  // Signature, then the IHDR chunk: length 13, "IHDR", width, height, depth, colour type.
  if (size < 8 + 8 + 13 || be32(data + 8) != 13 || std::memcmp(data + 12, "IHDR", 4) != 0)
    throw InputError(what + ": PNG without an IHDR chunk (truncated or corrupt)");
  const uint32_t width = be32(data + 16), height = be32(data + 20);
  const int depth = data[24], colour = data[25];
  ImageInfo info;
  info.format = ImageFormat::kPng;
  switch (colour) {
    case 0:
      info.channels = 1;
      break;
    case 2:
      info.channels = 3;
      break;
    case 3:
      info.channels = 3;
      break;  // palette entries are RGB
    case 4:
      info.channels = 2;
      break;
    case 6:
      info.channels = 4;
      break;
    default:
      throw InputError(what + ": PNG colour type " + std::to_string(colour) + " is not valid");
  }
  if (depth != 1 && depth != 2 && depth != 4 && depth != 8 && depth != 16)
    throw InputError(what + ": PNG bit depth " + std::to_string(depth) + " is not valid");
  check_dimensions(width, height, what);
  info.width = static_cast<int>(width);
  info.height = static_cast<int>(height);
  return info;
}

struct TjHandle {
  tjhandle handle = tjInitDecompress();
  ~TjHandle() {
    if (handle) tjDestroy(handle);
  }
};

ImageInfo jpeg_info(const uint8_t* data, size_t size, const std::string& what) {
  // One handle per thread: TurboJPEG handles are not thread-safe, and making one per call
  // costs an allocation of its whole state.
  thread_local TjHandle tj;
  if (!tj.handle)
    throw RuntimeError("tjInitDecompress failed: " + std::string(tjGetErrorStr2(nullptr)));
  int width = 0, height = 0, subsampling = 0, colourspace = 0;
  if (tjDecompressHeader3(tj.handle, data, static_cast<unsigned long>(size), &width, &height,
                          &subsampling, &colourspace) != 0)
    throw InputError(what + ": bad JPEG header: " + tjGetErrorStr2(tj.handle));
  check_dimensions(width, height, what);
  ImageInfo info;
  info.format = ImageFormat::kJpeg;
  info.width = width;
  info.height = height;
  info.channels = colourspace == TJCS_GRAY                                 ? 1
                  : (colourspace == TJCS_CMYK || colourspace == TJCS_YCCK) ? 4
                                                                           : 3;
  return info;
}

}  // namespace

ImageInfo read_image_info(const uint8_t* data, size_t size, const std::string& what) {
  if (is_png(data, size)) return png_info(data, size, what);
  if (is_jpeg(data, size)) return jpeg_info(data, size, what);
  throw_not_an_image(what);
}

// ---- JPEG (libjpeg API) ------------------------------------------------------------------

struct ImageDecoder::Jpeg {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr errmgr{};
  jpeg_progress_mgr progress{};
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {};
};

namespace {

using Jpeg = ImageDecoder::Jpeg;

Jpeg* jpeg_of(j_common_ptr cinfo) {
  // cinfo is the first member of Jpeg (standard layout).
  return reinterpret_cast<Jpeg*>(cinfo);
}

extern "C" void jpeg_on_error(j_common_ptr cinfo) {
  Jpeg* j = jpeg_of(cinfo);
  (*cinfo->err->format_message)(cinfo, j->message);
  // Over max_memory_to_use libjpeg asks for a backing store (a temporary file) it does not
  // have; say what that means.
  if (cinfo->err->msg_code == JERR_NO_BACKING_STORE || cinfo->err->msg_code == JERR_OUT_OF_MEMORY)
    std::snprintf(j->message, sizeof j->message,
                  "the image needs more than %ld MiB of decoder memory (max_memory_to_use)",
                  cinfo->mem->max_memory_to_use >> 20);
  std::longjmp(j->jump, 1);
}

extern "C" void jpeg_on_message(j_common_ptr cinfo, int level) {
  // Warnings (level -1) about corrupt entropy data are tolerated, as Pillow does (real data
  // sets have files with a few stray bytes); a premature end of the file is not: libjpeg
  // would fill the rest of the image with grey. Trace messages (level >= 0) are dropped.
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) jpeg_on_error(cinfo);
}

extern "C" void jpeg_on_progress(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > kMaxJpegScans) {
    Jpeg* j = jpeg_of(cinfo);
    std::snprintf(j->message, sizeof j->message, "progressive JPEG with more than %d scans",
                  kMaxJpegScans);
    std::longjmp(j->jump, 1);
  }
}

// Phase 1: the header. False (message in j.message) on error.
bool jpeg_read_header_phase(Jpeg& j, const uint8_t* data, size_t size) {
  if (setjmp(j.jump)) return false;
  jpeg_mem_src(&j.cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&j.cinfo, TRUE);
  return true;
}

// What phase 2 decodes: scale num/8, columns [x0, x1) and rows [y0, y1) of the scaled image.
struct JpegRegion {
  int scale_num;
  int x0, x1, y0, y1;
  bool cmyk;
  int skip;  // columns decoded left of x0 (the iMCU alignment of jpeg_crop_scanline)
};

// Phase 2: start the decompressor at the region's scale and columns; sets r.skip. Before
// the caller allocates the region, so an image libjpeg cannot take (its own buffers over the
// cap) fails before we touch memory for its pixels.
bool jpeg_start_phase(Jpeg& j, JpegRegion& r) {
  if (setjmp(j.jump)) return false;
  jpeg_decompress_struct& c = j.cinfo;
  c.scale_num = static_cast<unsigned>(r.scale_num);
  c.scale_denom = 8;
  c.out_color_space = r.cmyk ? JCS_CMYK : JCS_RGB;
  c.dct_method = JDCT_ISLOW;  // the accurate one, as Pillow and torchvision use
  jpeg_start_decompress(&c);
  if (c.output_width < static_cast<JDIMENSION>(r.x1) ||
      c.output_height < static_cast<JDIMENSION>(r.y1)) {
    std::snprintf(j.message, sizeof j.message, "scaled size %ux%u smaller than expected",
                  c.output_width, c.output_height);
    return false;
  }
  JDIMENSION xoffset = static_cast<JDIMENSION>(r.x0), width = static_cast<JDIMENSION>(r.x1 - r.x0);
  // Decode only the iMCU columns of the crop; libjpeg widens the span to iMCU boundaries.
  if (width < c.output_width) jpeg_crop_scanline(&c, &xoffset, &width);
  r.skip = r.x0 - static_cast<int>(xoffset);
  return true;
}

// Phase 3: decode the region's rows into `dst` (RGB, (x1 - x0) * 3 bytes per row). `row`
// holds one scaled row of 4 bytes per pixel.
bool jpeg_read_phase(Jpeg& j, const JpegRegion& r, uint8_t* dst, uint8_t* row) {
  if (setjmp(j.jump)) return false;
  jpeg_decompress_struct& c = j.cinfo;
  const int skip = r.skip;
  if (r.y0 > 0) jpeg_skip_scanlines(&c, static_cast<JDIMENSION>(r.y0));
  const int components = c.output_components, w = r.x1 - r.x0;
  for (int y = r.y0; y < r.y1; ++y) {
    JSAMPROW rows[1] = {row};
    if (jpeg_read_scanlines(&c, rows, 1) != 1) {
      std::snprintf(j.message, sizeof j.message, "decoder returned no row %d", y);
      return false;
    }
    uint8_t* out = dst + size_t(y - r.y0) * w * 3;
    const uint8_t* in = row + size_t(skip) * components;
    if (r.cmyk) {
      // CMYK JPEGs are written by Adobe software with inverted values (libjpeg marks them
      // with the Adobe APP14 marker it always writes for CMYK), so ink amounts are 255 - v and
      // R = (255 - C') (255 - K') / 255 = C K / 255: torchvision's decode_jpeg and Pillow's
      // "CMYK;I" rule. No colour management (no ICC profile is applied).
      for (int x = 0; x < w; ++x) {
        const int k = in[x * 4 + 3];
        for (int ch = 0; ch < 3; ++ch)
          out[x * 3 + ch] = static_cast<uint8_t>(in[x * 4 + ch] * k / 255);
      }
    } else {
      std::memcpy(out, in, size_t(w) * 3);
    }
  }
  jpeg_abort_decompress(&c);  // the rows below the region are not needed
  return true;
}

}  // namespace

ImageDecoder::ImageDecoder() : jpeg_(std::make_unique<Jpeg>()) {
  Jpeg& j = *jpeg_;
  j.cinfo.err = jpeg_std_error(&j.errmgr);
  j.errmgr.error_exit = jpeg_on_error;
  j.errmgr.emit_message = jpeg_on_message;
  j.progress.progress_monitor = jpeg_on_progress;
  // jpeg_create_decompress reports failure (out of memory) through error_exit.
  if (setjmp(j.jump)) throw RuntimeError(std::string("jpeg_create_decompress: ") + j.message);
  jpeg_create_decompress(&j.cinfo);
  j.cinfo.progress = &j.progress;
  // libjpeg's own buffers (a progressive image keeps every coefficient: 2 bytes per sample)
  // are capped, so a small file declaring a huge progressive image fails instead of
  // allocating gigabytes.
  j.cinfo.mem->max_memory_to_use = 512L << 20;
}

ImageDecoder::~ImageDecoder() {
  jpeg_destroy_decompress(&jpeg_->cinfo);
}

namespace {

// Decodes `window` of the JPEG in j (header already read, image W x H) at out_w x out_h, or
// returns the clamp box itself at full scale when out_w == 0.
DecodedImage jpeg_window(Jpeg& j, const SampleWindow& window, int out_w, int out_h,
                         const std::string& what) {
  jpeg_decompress_struct& c = j.cinfo;
  const int W = static_cast<int>(c.image_width), H = static_cast<int>(c.image_height);
  const CropBox& box = window.clamp;
  if (!box.inside(W, H))
    throw std::invalid_argument("decode_window: clamp box outside the " + std::to_string(W) + "x" +
                                std::to_string(H) + " image " + what);
  // The smallest DCT scale n/8 at which the window still has out_w x out_h pixels: the
  // scaled decode averages 8/n source pixels per output, so nothing is lost that the
  // (non-antialiased) bilinear step would have used.
  int num = 8;
  if (out_w > 0)
    for (int n = 1; n < 8; ++n)
      if (window.w * n >= 8.0 * out_w && window.h * n >= 8.0 * out_h) {
        num = n;
        break;
      }
  const double s = num / 8.0;
  const int scaled_w = static_cast<int>((int64_t{W} * num + 7) / 8);  // libjpeg's jdiv_round_up
  const int scaled_h = static_cast<int>((int64_t{H} * num + 7) / 8);
  JpegRegion r{};
  r.scale_num = num;
  r.x0 = static_cast<int>(std::floor(box.x * s));
  r.y0 = static_cast<int>(std::floor(box.y * s));
  r.x1 = std::min(scaled_w, static_cast<int>(std::ceil((box.x + box.w) * s)));
  r.y1 = std::min(scaled_h, static_cast<int>(std::ceil((box.y + box.h) * s)));
  const J_COLOR_SPACE cs = c.jpeg_color_space;
  r.cmyk = cs == JCS_CMYK || cs == JCS_YCCK;
  if (!r.cmyk && cs != JCS_GRAYSCALE && cs != JCS_YCbCr && cs != JCS_RGB)
    throw InputError(what + ": JPEG colour space " + std::to_string(int(cs)) + " with " +
                     std::to_string(c.num_components) + " components is not supported");
  const int rw = r.x1 - r.x0, rh = r.y1 - r.y0;
  if (!jpeg_start_phase(j, r)) throw InputError(what + ": corrupt JPEG: " + j.message);
  std::vector<uint8_t> region(size_t(rw) * rh * 3), row(size_t(scaled_w) * 4);
  if (!jpeg_read_phase(j, r, region.data(), row.data()))
    throw InputError(what + ": corrupt JPEG: " + j.message);
  DecodedImage out;
  if (out_w == 0) {
    out.width = rw;
    out.height = rh;
    out.pixels = std::move(region);
    return out;
  }
  SampleWindow scaled;
  scaled.x = window.x * s - r.x0;
  scaled.y = window.y * s - r.y0;
  scaled.w = window.w * s;
  scaled.h = window.h * s;
  scaled.clamp = {0, 0, rw, rh};
  out.width = out_w;
  out.height = out_h;
  out.pixels.resize(size_t(out_w) * out_h * 3);
  resize_bilinear(region.data(), rw, rh, size_t(rw) * 3, scaled, out.pixels.data(), out_w, out_h);
  return out;
}

// ---- PNG (libpng) ------------------------------------------------------------------------

struct PngState {
  const uint8_t* data;
  size_t size;
  size_t pos;
  char message[256];
  png_structp png;
  png_infop info;
};

extern "C" void png_on_error(png_structp png, png_const_charp message) {
  auto* st = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(st->message, sizeof st->message, "%s", message);
  png_longjmp(png, 1);
}
extern "C" void png_on_warning(png_structp, png_const_charp) {}  // not errors; nobody reads stderr

extern "C" void png_read_memory(png_structp png, png_bytep out, png_size_t n) {
  auto* st = static_cast<PngState*>(png_get_io_ptr(png));
  if (n > st->size - st->pos) png_error(png, "unexpected end of data (truncated file)");
  std::memcpy(out, st->data + st->pos, n);
  st->pos += n;
}

// Phase 1: header and transforms to 8-bit RGB; sets width and height.
bool png_header_phase(PngState& st, uint32_t& width, uint32_t& height) {
  if (setjmp(png_jmpbuf(st.png))) return false;
  png_set_read_fn(st.png, &st, png_read_memory);
  png_set_user_limits(st.png, 1u << 24, 1u << 24);  // the pixel count is checked below
  png_read_info(st.png, st.info);
  width = png_get_image_width(st.png, st.info);
  height = png_get_image_height(st.png, st.info);
  // To 8-bit RGB as Pillow's convert("RGB") does: palette and low-depth gray expanded,
  // 16-bit reduced to its high byte (Pillow reads RGB;16B that way), alpha dropped (not
  // composited), gray replicated into R, G and B.
  png_set_expand(st.png);
  png_set_strip_16(st.png);
  png_set_strip_alpha(st.png);
  png_set_gray_to_rgb(st.png);
  png_set_interlace_handling(st.png);
  png_read_update_info(st.png, st.info);
  return true;
}

bool png_pixels_phase(PngState& st, png_bytepp rows) {
  if (setjmp(png_jmpbuf(st.png))) return false;
  png_read_image(st.png, rows);
  return true;
}

struct PngGuard {
  PngState& st;
  ~PngGuard() { png_destroy_read_struct(&st.png, &st.info, nullptr); }
};

DecodedImage decode_png(const uint8_t* data, size_t size, const std::string& what) {
  png_info(data, size, what);  // signature, IHDR and the size limit before libpng allocates
  PngState st{data, size, 0, {}, nullptr, nullptr};
  st.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &st, png_on_error, png_on_warning);
  if (!st.png) throw RuntimeError("png_create_read_struct failed");
  PngGuard guard{st};
  st.info = png_create_info_struct(st.png);
  if (!st.info) throw RuntimeError("png_create_info_struct failed");
  uint32_t width = 0, height = 0;
  if (!png_header_phase(st, width, height)) throw InputError(what + ": corrupt PNG: " + st.message);
  check_dimensions(width, height, what);
  if (png_get_rowbytes(st.png, st.info) != size_t(width) * 3 ||
      png_get_channels(st.png, st.info) != 3)
    throw InputError(what + ": PNG layout not convertible to 8-bit RGB");
  DecodedImage img;
  img.width = static_cast<int>(width);
  img.height = static_cast<int>(height);
  img.pixels.resize(size_t(width) * height * 3);
  std::vector<png_bytep> rows(height);
  for (uint32_t y = 0; y < height; ++y) rows[y] = img.pixels.data() + size_t(y) * width * 3;
  if (!png_pixels_phase(st, rows.data())) throw InputError(what + ": corrupt PNG: " + st.message);
  return img;
}

// A JPEG's header read and its size checked, then `decode_pixels()`; whatever throws leaves
// the decompressor reset for the next image.
template <class DecodePixels>
DecodedImage decode_jpeg(ImageDecoder::Jpeg& j, const uint8_t* data, size_t size, const std::string& what,
                         DecodePixels&& decode_pixels) {
  if (!is_jpeg(data, size)) throw_not_an_image(what);
  if (!jpeg_read_header_phase(j, data, size)) {
    jpeg_abort_decompress(&j.cinfo);
    throw InputError(what + ": corrupt JPEG: " + j.message);
  }
  try {
    check_dimensions(j.cinfo.image_width, j.cinfo.image_height, what);
    return decode_pixels();
  } catch (...) {
    jpeg_abort_decompress(&j.cinfo);
    throw;
  }
}

}  // namespace

DecodedImage ImageDecoder::decode(const uint8_t* data, size_t size, const std::string& what) {
  if (is_png(data, size)) return decode_png(data, size, what);
  Jpeg& j = *jpeg_;
  return decode_jpeg(j, data, size, what, [&] {
    const CropBox whole{0, 0, int(j.cinfo.image_width), int(j.cinfo.image_height)};
    return jpeg_window(j, SampleWindow::of_box(whole), 0, 0, what);
  });
}

DecodedImage ImageDecoder::decode_crop(const uint8_t* data, size_t size, const CropBox& box,
                                       int out_w, int out_h, const std::string& what) {
  return decode_window(data, size, SampleWindow::of_box(box), out_w, out_h, what);
}

DecodedImage ImageDecoder::decode_window(const uint8_t* data, size_t size,
                                         const SampleWindow& window, int out_w, int out_h,
                                         const std::string& what) {
  if (out_w <= 0 || out_h <= 0) throw std::invalid_argument("decode_window: empty output size");
  if (is_png(data, size)) {
    const DecodedImage full = decode_png(data, size, what);
    const CropBox& c = window.clamp;
    if (c.x < 0 || c.y < 0 || c.w <= 0 || c.h <= 0 || c.x + c.w > full.width ||
        c.y + c.h > full.height)
      throw std::invalid_argument("decode_window: clamp box outside the image " + what);
    DecodedImage out;
    out.width = out_w;
    out.height = out_h;
    out.pixels.resize(size_t(out_w) * out_h * 3);
    resize_bilinear(full.pixels.data(), full.width, full.height, size_t(full.width) * 3, window,
                    out.pixels.data(), out_w, out_h);
    return out;
  }
  Jpeg& j = *jpeg_;
  return decode_jpeg(j, data, size, what, [&] { return jpeg_window(j, window, out_w, out_h, what); });
}

}  // namespace sdp
