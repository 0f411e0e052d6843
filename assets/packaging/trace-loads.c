/* The bytes of a program's own read-only data that it reads, each at its first read: the
   data half of assets/packaging/order-code's trace (callgrind gives the code half).

   Why not valgrind: the monitor is driven by the clock (a sample a second, a frame when one
   is due), and under valgrind a sample takes seconds, so it takes other paths than it does
   at full speed, and reads other data. This runs at full speed but for the reads it traps.

   How: loaded with LD_PRELOAD, before the program's own code runs, it takes every page of
   the span it is given away from the program (PROT_NONE). A read of one faults: the
   handler writes the address down (once), gives the page back, and sets the trap flag, so
   that the reading instruction runs once and traps; the trap's handler takes the page away
   again. So every read is seen, not only the first of each page. The kernel's reads of
   those pages (a path, or bytes to write, that lie in the program's data) fail rather than
   fault: for the calls that take such a buffer, a wrapper reads it here first (so it is
   written down) and gives its pages back while the call runs.

   A page read more than RETIRE times is left to the program from then on: a few pages the
   monitor reads all the time (the tables of character widths, the strings it draws) would
   otherwise cost two signals a read, and the monitor would not keep up with its samples.
   What else lies in such a page and is read only later is missed, at worst one block of
   data in memory more; a second run of order-code, on the layout the first made, has no
   such neighbours to miss.

   Limits: x86-64 Linux, glibc. A read from a thread while another's instruction has the
   page may be missed; the runs are long enough that a read made once a sample is seen.

   Build: cc -shared -fPIC -O2 -o trace-loads.so trace-loads.c -ldl
   Use:   STRATA_TRACE_LOADS=LO:HI:OUT LD_PRELOAD=./trace-loads.so PROGRAM...
          LO and HI: the span, as addresses in the program's file (hex, as the linker's map
          gives them); OUT: the file each address read is written to, one a line (hex). */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#if !defined(__x86_64__) || !defined(__linux__)
#error "trace-loads: x86-64 Linux only (it single-steps with the trap flag)"
#endif

#define PAGE 4096UL
#define TRAP_FLAG 0x100UL
#define RETIRE 4096

static uintptr_t first, last; /* the span's whole pages, as mapped */
static uintptr_t base;        /* where the program's file begins in memory */
static int out = -1;
static unsigned char *seen;   /* a bit a byte of the span */
static __thread uintptr_t lent; /* the page (and the next) given back for one instruction */
static unsigned *reads;       /* a count a page of the span, to RETIRE */

static int in_span(uintptr_t a) { return out >= 0 && a >= first && a < last; }

static void note(uintptr_t a) {
    uintptr_t i = a - first;
    unsigned char bit = (unsigned char)(1u << (i & 7));
    if (__atomic_fetch_or(&seen[i >> 3], bit, __ATOMIC_RELAXED) & bit) return;
    char line[24], digits[20];
    int n = 0, k = 0;
    uintptr_t v = a - base;
    do { digits[k++] = "0123456789abcdef"[v & 15]; v >>= 4; } while (v);
    while (k) line[n++] = digits[--k];
    line[n++] = '\n';
    /* The system call itself: this file's `write` would look its buffer over, and look up
       the C library's on its first call, neither of which a signal handler should do. */
    long w = syscall(SYS_write, out, line, (size_t)n);
    (void)w;
}

static void take(uintptr_t page, size_t pages) {
    uintptr_t end = page + pages * PAGE;
    if (page < first) page = first;
    if (end > last) end = last;
    for (; page < end; page += PAGE)
        if (__atomic_load_n(&reads[(page - first) / PAGE], __ATOMIC_RELAXED) <= RETIRE)
            mprotect((void *)page, PAGE, PROT_NONE);
}

static void give(uintptr_t page, size_t pages) {
    uintptr_t end = page + pages * PAGE;
    if (page < first) page = first;
    if (end > last) end = last;
    if (end > page) mprotect((void *)page, end - page, PROT_READ);
}

static void on_fault(int sig, siginfo_t *info, void *context) {
    uintptr_t a = (uintptr_t)info->si_addr;
    (void)sig;
    if (!in_span(a)) {
        /* Not ours: fault again with the default action, as the program would have. */
        signal(SIGSEGV, SIG_DFL);
        return;
    }
    note(a);
    uintptr_t page = a & ~(PAGE - 1);
    if (__atomic_add_fetch(&reads[(page - first) / PAGE], 1, __ATOMIC_RELAXED) > RETIRE) {
        give(page, 1); /* retired: the program's from now on */
        return;
    }
    lent = page;
    give(lent, 2); /* and the next page, for a read across the end of this one */
    ((ucontext_t *)context)->uc_mcontext.gregs[REG_EFL] |= TRAP_FLAG;
}

static void on_step(int sig, siginfo_t *info, void *context) {
    (void)sig;
    (void)info;
    if (lent) {
        take(lent, 2);
        lent = 0;
    }
    ((ucontext_t *)context)->uc_mcontext.gregs[REG_EFL] &= ~TRAP_FLAG;
}

__attribute__((constructor)) static void start(void) {
    const char *spec = getenv("STRATA_TRACE_LOADS");
    if (!spec) return;
    char path[4096];
    unsigned long lo, hi;
    if (sscanf(spec, "%lx:%lx:%4095s", &lo, &hi, path) != 3 || hi <= lo) {
        fprintf(stderr, "trace-loads: STRATA_TRACE_LOADS is LO:HI:OUT, not %s\n", spec);
        return;
    }
    /* The children of the program are not traced, nor do they write to OUT. */
    unsetenv("LD_PRELOAD");
    unsetenv("STRATA_TRACE_LOADS");
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return;
    exe[n] = 0;
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[8192];
    while (maps && fgets(line, sizeof line, maps)) {
        unsigned long from, to, offset;
        char file[4096] = "";
        if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %4095s", &from, &to, &offset, file) >= 3
            && offset == 0 && strcmp(file, exe) == 0) {
            base = from;
            break;
        }
    }
    if (maps) fclose(maps);
    if (!base) {
        fprintf(stderr, "trace-loads: %s is not in this process's maps\n", exe);
        return;
    }
    first = (base + lo + PAGE - 1) & ~(PAGE - 1);
    last = (base + hi) & ~(PAGE - 1);
    seen = calloc((last - first) / 8 + 1, 1);
    reads = calloc((last - first) / PAGE + 1, sizeof *reads);
    out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (!seen || !reads || out < 0) {
        fprintf(stderr, "trace-loads: cannot write %s\n", path);
        out = -1;
        return;
    }
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_flags = SA_SIGINFO;
    action.sa_sigaction = on_fault;
    sigaction(SIGSEGV, &action, NULL);
    action.sa_sigaction = on_step;
    sigaction(SIGTRAP, &action, NULL);
    mprotect((void *)first, last - first, PROT_NONE);
}

/* A handler that blocks every signal, or a thread that does, would make a fault in the span
   fatal: SIGSEGV and SIGTRAP stay open, and stay this file's. */

int sigaction(int sig, const struct sigaction *action, struct sigaction *old) {
    static int (*real)(int, const struct sigaction *, struct sigaction *);
    if (!real) real = dlsym(RTLD_NEXT, "sigaction");
    if (!action) return real(sig, action, old);
    if (out >= 0 && (sig == SIGSEGV || sig == SIGTRAP) && action->sa_sigaction != on_fault
        && action->sa_sigaction != on_step)
        return old ? real(sig, NULL, old) : 0;
    struct sigaction open = *action;
    sigdelset(&open.sa_mask, SIGSEGV);
    sigdelset(&open.sa_mask, SIGTRAP);
    return real(sig, &open, old);
}

int pthread_sigmask(int how, const sigset_t *set, sigset_t *old) {
    static int (*real)(int, const sigset_t *, sigset_t *);
    if (!real) real = dlsym(RTLD_NEXT, "pthread_sigmask");
    if (!set || how == SIG_UNBLOCK) return real(how, set, old);
    sigset_t open = *set;
    sigdelset(&open, SIGSEGV);
    sigdelset(&open, SIGTRAP);
    return real(how, &open, old);
}

int sigprocmask(int how, const sigset_t *set, sigset_t *old) {
    return pthread_sigmask(how, set, old);
}

/* The calls whose buffers the kernel reads. Each byte of a buffer in the span is read here
   (and so written down), and its pages are the program's while the call runs. */

static size_t lend(const void *buffer, size_t size) {
    uintptr_t a = (uintptr_t)buffer;
    if (!buffer || !size || a + size <= first || a >= last) return 0;
    volatile const unsigned char *bytes = buffer;
    for (size_t i = 0; i < size; i++) (void)bytes[i];
    uintptr_t page = a & ~(PAGE - 1);
    size_t pages = (a + size - page + PAGE - 1) / PAGE;
    give(page, pages);
    return pages;
}

static size_t lend_string(const char *s) {
    uintptr_t a = (uintptr_t)s;
    if (!s || a < first || a >= last) return 0;
    return lend(s, strlen(s) + 1);
}

static void take_back(const void *buffer, size_t pages) {
    if (pages) take((uintptr_t)buffer & ~(PAGE - 1), pages);
}

/* The C library's `name`, which this file's `name` stands in front of. */
#define REAL(name) \
    static __typeof__(name) *real; \
    if (!real) real = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void *buffer, size_t size) {
    REAL(write);
    size_t pages = lend(buffer, size);
    ssize_t r = real(fd, buffer, size);
    take_back(buffer, pages);
    return r;
}

ssize_t send(int fd, const void *buffer, size_t size, int flags) {
    REAL(send);
    size_t pages = lend(buffer, size);
    ssize_t r = real(fd, buffer, size, flags);
    take_back(buffer, pages);
    return r;
}

ssize_t sendto(int fd, const void *buffer, size_t size, int flags,
               const struct sockaddr *to, socklen_t length) {
    REAL(sendto);
    size_t pages = lend(buffer, size);
    ssize_t r = real(fd, buffer, size, flags, to, length);
    take_back(buffer, pages);
    return r;
}

ssize_t writev(int fd, const struct iovec *parts, int count) {
    REAL(writev);
    size_t pages[64] = {0};
    for (int i = 0; i < count && i < 64; i++) pages[i] = lend(parts[i].iov_base, parts[i].iov_len);
    ssize_t r = real(fd, parts, count);
    for (int i = 0; i < count && i < 64; i++) take_back(parts[i].iov_base, pages[i]);
    return r;
}

int statx(int dir, const char *path, int flags, unsigned int mask, struct statx *into) {
    REAL(statx);
    size_t pages = lend_string(path);
    int r = real(dir, path, flags, mask, into);
    take_back(path, pages);
    return r;
}

int openat(int dir, const char *path, int flags, ...) {
    REAL(openat);
    va_list rest;
    va_start(rest, flags);
    mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? va_arg(rest, mode_t) : 0;
    va_end(rest);
    size_t pages = lend_string(path);
    int r = real(dir, path, flags, mode);
    take_back(path, pages);
    return r;
}

int open(const char *path, int flags, ...) {
    va_list rest;
    va_start(rest, flags);
    mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? va_arg(rest, mode_t) : 0;
    va_end(rest);
    /* The C library's `open` is `openat` of the working directory, as here. */
    return openat(AT_FDCWD, path, flags, mode);
}
