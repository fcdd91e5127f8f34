// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/* falcon's kernel sender. Run with BPF_PROG_RUN in live-frame mode on the
 * sending host's wire device, it hands one frame (a datagram as the overlay
 * itself encapsulated it, captured once) to the device again and again:
 * XDP_TX in live-frame mode is a redirect back out of that device, so each
 * frame costs the sending CPU one program run and one ndo_xdp_xmit, and no
 * socket, no UDP or IP output, no encapsulation. That is about what a
 * remote host costs the receiving one, which the testbed's senders
 * (iperf3, sockperf) are not: they share its CPUs.
 *
 * Frame n is of template n % ntemplates (the templates differ in headers
 * only: one destination each) and of flow (n / ntemplates) % flows of it:
 * the inner (and outer) UDP source ports are base + flow. The kernel recycles live frames without resetting them,
 * and the receive path writes into them (a routed overlay decrements the
 * inner TTL and, pushing the next hop's Ethernet header, overwrites the
 * last bytes of the VXLAN header): so every frame gets its headers again
 * from the template, then its flow's ports. Both UDP checksums are 0 in the
 * template (IPv4 allows it), so nothing needs recomputing. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* Set at load. */
const volatile __u32 flows = 1;
const volatile __u32 ntemplates = 1;
const volatile __u32 inner_sport_off = 0; /* offset of the inner UDP source port */
const volatile __u32 outer_sport_off = 0; /* of the outer one; 0: not encapsulated */
const volatile __u16 inner_base = 0;
const volatile __u16 outer_base = 0;

/* Frames handed to the device; the bench reads it for the sent count. */
__u64 frames = 0;

#define MAX_HDR 128
#define MAX_TEMPLATES 64

/* A frame's headers, up to the end of the innermost UDP header. */
struct template {
	__u32 len;
	__u8 hdr[MAX_HDR];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_TEMPLATES);
	__type(key, __u32);
	__type(value, struct template);
} templates SEC(".maps");

/* The frame is the captured one, never longer than a page: an offset past
 * MAX_OFFSET is a bad template, refused before the store. */
#define MAX_OFFSET 2048

static __always_inline int put_port(void *data, void *end, __u32 off, __u16 port)
{
	if (off > MAX_OFFSET)
		return -1;
	__u8 *p = (__u8 *)data + off;
	if ((void *)(p + 2) > end)
		return -1;
	p[0] = port >> 8;
	p[1] = port & 0xff;
	return 0;
}

SEC("xdp")
int falcon_send(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 nt = ntemplates, k = nt > 1 ? (__u32)(frames % nt) : 0;
	__u64 n = frames / (nt ? nt : 1);
	__u16 flow = flows > 1 ? (__u16)(n % flows) : 0;
	struct template *t = bpf_map_lookup_elem(&templates, &k);
	__u8 *p = data;

	if (!t)
		return XDP_ABORTED;
	for (int i = 0; i < MAX_HDR; i++) {
		if (i >= t->len)
			break;
		if ((void *)(p + i + 1) > end)
			return XDP_ABORTED;
		p[i] = t->hdr[i];
	}

	if (put_port(data, end, inner_sport_off, inner_base + flow))
		return XDP_ABORTED;
	if (outer_sport_off && put_port(data, end, outer_sport_off, outer_base + flow))
		return XDP_ABORTED;
	frames++;
	return XDP_TX;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
