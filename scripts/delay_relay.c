// A host's link for scripts/simcluster.sh (`delay`), where the kernel has no netem qdisc:
// every frame that arrives on one interface leaves on the other DELAY_US microseconds later,
// in order, both ways; with a rate, also no sooner than a wire of that rate carries it (see
// take()). IF_A is the host's side (its switch port), IF_B the switch's. Frames are read and
// written with their virtio-net header (PACKET_VNET_HDR), so the veths' segmentation offload
// passes through whole.
// A wire takes nothing from the hosts' cores, so the relay runs at a real-time priority: on
// simulated hosts that share this machine's cores, a relay scheduled like any other process
// waits behind the ranks computing (or polling MPI) on its core, and every frame comes out
// late by that wait, by more the busier the hosts.
//
//   delay_relay IF_A IF_B DELAY_US [RATE_BITS_PER_S]
//                                      (runs until killed; simcluster.sh starts and stops it)
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

enum { kScratch = 65536 + 64 };
enum { kEarlyNs = 15000 };

struct frame {
  struct frame* next;
  int64_t due_ns;
  size_t size;
  unsigned char bytes[];
};

// Frames waiting to leave one way, oldest first (one delay for all: FIFO is due order), and
// when the wire that way is free again (with a rate: the last frame's last byte).
struct queue {
  struct frame *head, *tail;
  int64_t wire_free_ns;
};

// The bytes a frame puts on the wire: an offload segment (GSO, up to 64 KiB) leaves as
// gso_size-byte segments, each with its own copy of the Ethernet, IPv4 and TCP headers (as
// tc counts it).
static size_t wire_bytes(const unsigned char* bytes, size_t size) {
  const struct virtio_net_hdr* vnet = (const struct virtio_net_hdr*)bytes;
  const size_t frame = size - sizeof *vnet;
  const unsigned char* eth = bytes + sizeof *vnet;
  if (vnet->gso_type == VIRTIO_NET_HDR_GSO_NONE || vnet->gso_size == 0 || frame < 14 + 20 + 20 ||
      eth[12] != 0x08 || eth[13] != 0x00 || eth[14 + 9] != 6)
    return frame;
  const size_t ip = (size_t)(eth[14] & 0x0f) * 4;
  if (frame < 14 + ip + 20) return frame;
  const size_t headers = 14 + ip + (size_t)(eth[14 + ip + 12] >> 4) * 4;
  if (frame <= headers) return frame;
  const size_t segments = (frame - headers + vnet->gso_size - 1) / vnet->gso_size;
  return frame + (segments - 1) * headers;
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void die(const char* what) {
  fprintf(stderr, "delay_relay: %s: %s\n", what, strerror(errno));
  exit(1);
}

static int open_port(const char* name) {
  const int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
  if (fd < 0) die("socket(AF_PACKET)");
  const int one = 1;
  if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) < 0) die("PACKET_VNET_HDR");
  // Our own sends on this interface must not come back to us as arrivals.
  if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) < 0) die("PACKET_IGNORE_OUTGOING");
  struct sockaddr_ll at;
  memset(&at, 0, sizeof at);
  at.sll_family = AF_PACKET;
  at.sll_protocol = htons(ETH_P_ALL);
  at.sll_ifindex = (int)if_nametoindex(name);
  if (at.sll_ifindex == 0) die(name);
  if (bind(fd, (struct sockaddr*)&at, sizeof at) < 0) die("bind");
  // Room for a link's worth of frames while they wait their turn: with the default receive
  // buffer (about 200 KB of socket memory), links of 9,000-byte frames without segmentation
  // offload dropped frames in bursts, and TCP retransmitted (94 segments in one benchmark).
  const int room = 16 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &room, sizeof room) < 0 &&
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &room, sizeof room) < 0)
    die("SO_RCVBUF");
  struct packet_mreq promisc;
  memset(&promisc, 0, sizeof promisc);
  promisc.mr_ifindex = at.sll_ifindex;
  promisc.mr_type = PACKET_MR_PROMISC;
  if (setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &promisc, sizeof promisc) < 0) die("promiscuous mode");
  return fd;
}

// Every frame waiting on `from_fd` into `q`, due `delay_ns` from now. With a rate (bits per
// second; 0: none), due `delay_ns` after its last byte would have crossed a wire of that
// rate, behind the frames before it, so the link never passes more than its rate (tc's token
// bucket lets a saved-up burst through at once):
//   from the host (store and forward): the frame's bytes take their time on the wire after
//     it arrives, even on an idle wire, as a NIC sends them;
//   to the host (cut through): the frame arrives from the switch at the rate it crossed the
//     sender's link, so its bytes started arriving that long ago; it waits only for the
//     frames ahead of it on this wire (several hosts sending to one), as in a switch that
//     forwards a frame while it still arrives.
static void take(int from_fd, struct queue* q, int64_t delay_ns, double rate_bps, int cut_through,
                 unsigned char* scratch) {
  for (;;) {
    const ssize_t n = recv(from_fd, scratch, kScratch, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
      die("recv");
    }
    struct frame* f = malloc(sizeof *f + (size_t)n);
    if (f == NULL) die("malloc");
    f->next = NULL;
    f->size = (size_t)n;
    memcpy(f->bytes, scratch, (size_t)n);
    int64_t arrived = now_ns();
    if (rate_bps > 0 && f->size > sizeof(struct virtio_net_hdr)) {
      const int64_t on_wire = (int64_t)(8e9 * (double)wire_bytes(f->bytes, f->size) / rate_bps);
      int64_t start = cut_through ? arrived - on_wire : arrived;
      if (q->wire_free_ns > start) start = q->wire_free_ns;
      arrived = start + on_wire;
      q->wire_free_ns = arrived;
    }
    f->due_ns = arrived + delay_ns;
    if (q->tail) q->tail->next = f; else q->head = f;
    q->tail = f;
  }
}

// Sends the frames of `q` that are due; a full device queue keeps them for the next round.
static void send_due(int to_fd, struct queue* q, int64_t now) {
  while (q->head != NULL && q->head->due_ns <= now) {
    struct frame* f = q->head;
    if (send(to_fd, f->bytes, f->size, MSG_DONTWAIT) < 0) {
      if (errno == EAGAIN || errno == ENOBUFS || errno == EINTR) return;
      die("send");
    }
    q->head = f->next;
    if (q->head == NULL) q->tail = NULL;
    free(f);
  }
}

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: delay_relay IF_A IF_B DELAY_US [RATE_BITS_PER_S]\n");
    return 2;
  }
  const int64_t delay_ns = (int64_t)(atof(argv[3]) * 1000);
  const double rate_bps = argc == 5 ? atof(argv[4]) : 0.0;
  // Wake on time: a real-time thread preempts the hosts' processes at once, and its timers
  // fire without the default 50 us of slack. Without the privilege it runs as before, and
  // says so in its log.
  const struct sched_param realtime = {.sched_priority = 50};
  if (sched_setscheduler(0, SCHED_FIFO, &realtime) != 0)
    fprintf(stderr, "delay_relay: no real-time priority (%s): frames may leave late on busy cores\n",
            strerror(errno));
  (void)prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  const int a = open_port(argv[1]), b = open_port(argv[2]);
  const int timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
  if (timer < 0) die("timerfd_create");
  static unsigned char scratch[kScratch];
  struct queue a_to_b = {NULL, NULL, 0}, b_to_a = {NULL, NULL, 0};
  for (;;) {
    struct pollfd fds[3] = {{a, POLLIN, 0}, {b, POLLIN, 0}, {timer, POLLIN, 0}};
    if (poll(fds, 3, -1) < 0 && errno != EINTR) die("poll");
    if (fds[2].revents) {
      uint64_t ticks;
      (void)!read(timer, &ticks, sizeof ticks);
    }
    if (fds[0].revents) take(a, &a_to_b, delay_ns, rate_bps, /*cut_through=*/0, scratch);
    if (fds[1].revents) take(b, &b_to_a, delay_ns, rate_bps, /*cut_through=*/1, scratch);
    // Frames due within kEarlyNs leave now: a timer's wake-up here takes tens of microseconds,
    // longer than a small frame's time on the wire (1 us for 125 bytes at 1 Gbit/s). The wire's
    // schedule (wire_free_ns) stays exact, so no frame leaves more than that early.
    const int64_t now = now_ns();
    send_due(b, &a_to_b, now + kEarlyNs);
    send_due(a, &b_to_a, now + kEarlyNs);
    // Wake for the earliest frame still waiting (20 us from now if it is already due: the
    // device queue was full, and a real-time thread retrying sooner would spin a core away).
    int64_t next = INT64_MAX;
    if (a_to_b.head) next = a_to_b.head->due_ns;
    if (b_to_a.head && b_to_a.head->due_ns < next) next = b_to_a.head->due_ns;
    struct itimerspec when;
    memset(&when, 0, sizeof when);
    if (next != INT64_MAX) {
      if (next <= now) next = now + 20000;
      when.it_value.tv_sec = next / 1000000000;
      when.it_value.tv_nsec = next % 1000000000;
    }
    if (timerfd_settime(timer, TFD_TIMER_ABSTIME, &when, NULL) < 0) die("timerfd_settime");
  }
}
