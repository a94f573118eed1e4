/* SPDX-License-Identifier: MIT */
/* retrydctl status: whether this process would share the host budget. */
#ifndef RETRYD_CTL_STATUS_H
#define RETRYD_CTL_STATUS_H

int ctl_status_main(int argc, char **argv);

#endif
