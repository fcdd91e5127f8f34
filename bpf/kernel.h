/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* The few kernel structures falcon's tracing programs read (guard.c,
 * lab/stagetrace.c, lab/stagecost.c). No vmlinux.h: only the fields used are declared, with
 * preserve_access_index, so CO-RE finds them wherever the running kernel
 * keeps them. The includer provides __u16/__be16 and friends. */
#ifndef FALCON_KERNEL_H
#define FALCON_KERNEL_H

struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
} __attribute__((preserve_access_index));

typedef struct {
	struct net *net;
} possible_net_t;

struct net_device {
	int ifindex;
	possible_net_t nd_net;
} __attribute__((preserve_access_index));

struct sk_buff {
	struct net_device *dev;
	unsigned int len;
	unsigned int data_len;
	__be16 protocol;
	unsigned int end;
	__u16 network_header;
	unsigned char *head;
	unsigned char *data;
	__u16 tc_index; /* CONFIG_NET_SCHED */
} __attribute__((preserve_access_index));

struct napi_struct {
	struct net_device *dev; /* NULL for a CPU's backlog */
} __attribute__((preserve_access_index));

struct task_struct {
	unsigned int flags;
	char comm[16];
} __attribute__((preserve_access_index));

struct skb_shared_info {
	unsigned short gso_segs;
} __attribute__((preserve_access_index));

#endif
