/* SPDX-License-Identifier: MIT */
/*
 * The segment's layout and its validation. Every process that maps the
 * segment goes through retryd__segment_view() before it dereferences
 * anything, and every slot index it reads from anywhere goes through the
 * bounds-checked accessors, so a corrupted segment yields an error rather
 * than a crash in somebody else's service.
 */
#include "shared/segment.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "retryd/common.h"

_Static_assert(sizeof(seg_header) <= SEG_HEADER_SIZE, "header fits its page");
_Static_assert(offsetof(seg_upstream, tokens) == 0, "token word leads");
_Static_assert(offsetof(seg_upstream, ident) == SEG_LINE,
               "the token word is alone on its cache line");
_Static_assert(offsetof(seg_upstream, counters) % SEG_LINE == 0,
               "statistics start on their own line");
_Static_assert(sizeof(seg_upstream) % SEG_LINE == 0, "slots are whole lines");
_Static_assert(sizeof(seg_process) % SEG_LINE == 0, "slots are whole lines");

static size_t align_up(size_t n, size_t a)
{
    return (n + a - 1) / a * a;
}

size_t retryd__segment_size(uint32_t upstreams, uint32_t processes)
{
    size_t up = align_up((size_t)upstreams * sizeof(seg_upstream), 4096);
    size_t pr = align_up((size_t)processes * sizeof(seg_process), 4096);
    return SEG_HEADER_SIZE + up + pr;
}

void retryd__segment_format_zeroed(void *mem, uint32_t upstreams,
                                   uint32_t processes, uint64_t generation,
                                   uint64_t created_unix_ms)
{
    seg_header *h = mem;
    size_t size = retryd__segment_size(upstreams, processes);

    h->layout_version = SEG_LAYOUT_VERSION;
    h->header_size = SEG_HEADER_SIZE;
    h->total_size = size;
    h->upstream_capacity = upstreams;
    h->process_capacity = processes;
    h->upstream_slot_size = sizeof(seg_upstream);
    h->process_slot_size = sizeof(seg_process);
    h->upstreams_offset = SEG_HEADER_SIZE;
    h->processes_offset =
        SEG_HEADER_SIZE +
        align_up((size_t)upstreams * sizeof(seg_upstream), 4096);
    h->generation = generation;
    h->created_unix_ms = created_unix_ms;
    /* The magic goes last: a reader that sees it sees the rest. */
    __atomic_store_n(&h->magic, SEG_MAGIC, __ATOMIC_RELEASE);
}

/* Whether [off, off + len) lies inside [0, size), without overflow. */
static bool inside(uint64_t off, uint64_t len, uint64_t size)
{
    return off <= size && len <= size - off;
}

int retryd__segment_view(void *mem, size_t size, seg_view *ret)
{
    const seg_header *h = mem;

    if (mem == NULL || size < SEG_HEADER_SIZE)
        return RETRYD_ECORRUPT;
    if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != SEG_MAGIC)
        return RETRYD_ECORRUPT;
    if (h->layout_version != SEG_LAYOUT_VERSION ||
        h->header_size != SEG_HEADER_SIZE ||
        h->upstream_slot_size != sizeof(seg_upstream) ||
        h->process_slot_size != sizeof(seg_process))
        return RETRYD_EVERSION;
    if (h->total_size != size || h->upstream_capacity == 0 ||
        h->upstream_capacity > SEG_MAX_UPSTREAMS || h->process_capacity == 0 ||
        h->process_capacity > SEG_MAX_PROCESSES)
        return RETRYD_ECORRUPT;
    if (h->upstreams_offset % SEG_LINE != 0 ||
        h->processes_offset % SEG_LINE != 0 ||
        !inside(h->upstreams_offset,
                (uint64_t)h->upstream_capacity * sizeof(seg_upstream), size) ||
        !inside(h->processes_offset,
                (uint64_t)h->process_capacity * sizeof(seg_process), size) ||
        h->upstreams_offset < SEG_HEADER_SIZE ||
        h->processes_offset < SEG_HEADER_SIZE)
        return RETRYD_ECORRUPT;

    *ret = (seg_view){
        .hdr = mem,
        .upstreams = (seg_upstream *)((char *)mem + h->upstreams_offset),
        .processes = (seg_process *)((char *)mem + h->processes_offset),
        .upstream_capacity = h->upstream_capacity,
        .process_capacity = h->process_capacity,
        .size = size,
    };
    return 0;
}

seg_upstream *retryd__segment_upstream(const seg_view *v, uint32_t index)
{
    return index < v->upstream_capacity ? &v->upstreams[index] : NULL;
}

seg_process *retryd__segment_process(const seg_view *v, uint32_t index)
{
    return index < v->process_capacity ? &v->processes[index] : NULL;
}

uint64_t retryd__process_start_time(uint64_t pid)
{
    char path[64], buf[1024];
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%llu/stat", (unsigned long long)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* The command name (field 2) may hold spaces and parentheses; fields
     * after it start behind the last ')'. Field 22 is the 20th after it. */
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return 0;
    int field = 2;
    for (; *p != '\0'; p++) {
        if (*p == ' ' && ++field == 22) {
            unsigned long long t = 0;
            for (p++; *p >= '0' && *p <= '9'; p++)
                t = t * 10 + (unsigned long long)(*p - '0');
            return t;
        }
    }
    return 0;
}
