// A library that looks like an NCCL net plugin to inter_node.cpp's probe: it exports the
// versioned struct's symbol (its contents are never read; NCCL is not involved).
extern "C" {
__attribute__((visibility("default"))) char ncclNet_v8[64] = {0};
}
