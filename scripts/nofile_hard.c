/*
 * A benchmark harness aid, not part of cotal: preloaded (LD_PRELOAD) into one `cotal apply`
 * of scripts/bench.sh, it reports the hard open-file limit as $NOFILE_HARD to the process
 * (when that is wider than the real one).
 *
 * Why: cotal refuses to add spaces past what the broker's open-file limit holds (with the
 * broker stopped, the limit `cotal up` would give it: this process's hard limit). On a host
 * whose hard limit cannot be raised (a sandbox without CAP_SYS_RESOURCE), that refusal makes
 * a root of 10,000 spaces impossible to build, so the plan of 10,000 spaces could not be
 * measured. The benchmark builds that root with this shim, never starts a broker on it, and
 * times `cotal plan` on it without the shim. Nothing else is affected: the limit itself is not
 * raised (a broker started under it would still fail), only what getrlimit reports. glibc
 * only (`__rlimit_resource_t`); scripts/bench.sh falls back to the capacity where it does not
 * build.
 *
 * Built by scripts/bench.sh with the system C compiler:
 *   cc -shared -fPIC -O2 -o nofile_hard.so scripts/nofile_hard.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/resource.h>

/* The hard limit reported: $NOFILE_HARD when it is a number wider than the real one. */
static void report_wider(int resource, rlim_t *hard) {
  const char *wanted = getenv("NOFILE_HARD");
  if (resource != RLIMIT_NOFILE || wanted == NULL || *wanted == '\0') {
    return;
  }
  char *end = NULL;
  errno = 0;
  unsigned long long value = strtoull(wanted, &end, 10);
  if (errno == 0 && *end == '\0' && (rlim_t)value > *hard) {
    *hard = (rlim_t)value;
  }
}

int getrlimit(__rlimit_resource_t resource, struct rlimit *limit) {
  static int (*real)(__rlimit_resource_t, struct rlimit *);
  if (real == NULL) {
    real = (int (*)(__rlimit_resource_t, struct rlimit *))dlsym(RTLD_NEXT, "getrlimit");
    if (real == NULL) {
      errno = ENOSYS;
      return -1;
    }
  }
  int rc = real(resource, limit);
  if (rc == 0) {
    report_wider(resource, &limit->rlim_max);
  }
  return rc;
}

int getrlimit64(__rlimit_resource_t resource, struct rlimit64 *limit) {
  static int (*real)(__rlimit_resource_t, struct rlimit64 *);
  if (real == NULL) {
    real = (int (*)(__rlimit_resource_t, struct rlimit64 *))dlsym(RTLD_NEXT, "getrlimit64");
    if (real == NULL) {
      errno = ENOSYS;
      return -1;
    }
  }
  int rc = real(resource, limit);
  if (rc == 0) {
    rlim_t hard = (rlim_t)limit->rlim_max;
    report_wider(resource, &hard);
    limit->rlim_max = (rlim64_t)hard;
  }
  return rc;
}
