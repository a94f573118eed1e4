/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer: the input is a configuration file. It is written to a memfd
 * and config_load() reads it back through /proc/self/fd/N, as it would
 * read /etc/retryd.conf.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/config.h"
#include "shared/segment.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    char err[512] = "";
    config *cfg = NULL;

    if (fd < 0) {
        fd = memfd_create("fuzz_config", MFD_CLOEXEC);
        if (fd < 0)
            __builtin_trap(); /* the harness itself is broken */
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
        __builtin_trap();

    int r = config_load(path, &cfg, err, sizeof(err));
    if (r == 0) {
        if (cfg == NULL || cfg->defaults.cap_micro < SEG_MICRO)
            __builtin_trap();
        for (size_t i = 0; i < cfg->n_upstreams; i++)
            if (!seg_name_valid(cfg->upstreams[i].name) ||
                cfg->upstreams[i].params.cap_micro < SEG_MICRO)
                __builtin_trap();
        config_free(cfg);
    } else if (r > 0 || err[0] == '\0' ||
               strncmp(err, path, strlen(path)) != 0) {
        __builtin_trap();
    }
    return 0;
}
