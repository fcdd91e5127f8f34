/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* The kernel's fixed-width types for the programs built without
 * linux/types.h or vmlinux.h (the observers: stagetrace.c, stagecost.c),
 * which declare the few kernel fields they read in kernel.h. */
#ifndef FALCON_TYPES_H
#define FALCON_TYPES_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;

#endif
