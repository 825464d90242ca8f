/*
 * hotset: the end-to-end harness's target program, a process with a known hot set.
 *
 *   hotset SIZE_MIB HOT_MIB NODE INFO_FILE [DURATION_S]
 *
 * 1. mmaps an anonymous buffer of SIZE_MIB, MADV_NOHUGEPAGE (so every page is a 4 KiB
 *    page that move_pages(2) moves and queries one by one);
 * 2. fills it with a known pattern under set_mempolicy(MPOL_BIND, {NODE}), so every page
 *    starts on NODE, then drops the task policy again (MPOL_DEFAULT) so nothing but the
 *    daemon decides where pages go later;
 * 3. writes "pid addr len hot_len" (addr in hex, lengths in bytes) to INFO_FILE
 *    (atomically: a temporary file renamed into place, so a poller never reads half);
 * 4. loops reading one byte of every page of the first HOT_MIB (the hot set; the rest is
 *    never touched again), with the TCG TLB-flush trick below, until SIGTERM or
 *    DURATION_S seconds (0 or absent: forever).
 *
 * With HOTSET_PREFERRED in the environment the fill prefers NODE (MPOL_PREFERRED) instead
 * of binding to it: a buffer larger than the node's free memory fills the node and the
 * rest lands elsewhere, with no OOM kill.
 *
 * With HOTSET_PIN_PAGES=N in the environment, the first N pages of the hot set are
 * pinned after the fill: vmsplice(2) hands them to a pipe that is never read, so the
 * pipe holds references to them and the kernel cannot migrate them (move_pages then
 * returns how many pages it could not move and leaves their status words unwritten).
 *
 * The hot loop only reads, so the buffer's contents never change: SIGUSR1 verifies the
 * whole buffer against the pattern and prints "hotset: checksum ok|BAD ..." to stdout
 * and carries on; SIGTERM / the end of DURATION_S verifies, prints and exits 0 (ok) or 1
 * (corrupted). That is the "target's checksum is unchanged" oracle of the fault tests.
 *
 * TCG caveat (shared/reference/qemu-numa.md item 4): QEMU's software TLB sets a PTE's
 * accessed bit only on a TLB refill, and the kernel clears accessed bits without a
 * flush, so a process re-reading the same pages looks idle to DAMON. Each loop therefore
 * mprotects a 64-page dummy mapping read-only and back: changing more than 33 PTEs makes
 * the kernel flush the whole mm's TLB, and TCG refills (and re-sets accessed bits).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define MPOL_DEFAULT 0
#define MPOL_PREFERRED 1
#define MPOL_BIND 2
#define FLUSH_PAGES 64

static volatile sig_atomic_t stop_flag, verify_flag;

static void on_term(int sig) { (void)sig; stop_flag = 1; }
static void on_usr1(int sig) { (void)sig; verify_flag = 1; }

/* The pattern: a function of the offset, so a page moved with the wrong contents (or a
 * page lost) shows as a mismatch at a known place. */
static inline uint64_t pattern(uint64_t word_index) {
    uint64_t x = word_index * 0x9E3779B97F4A7C15ULL;
    return x ^ (x >> 29) ^ 0x5A5A5A5A5A5A5A5AULL;
}

static uint64_t *buf;
static size_t nwords;
static uint64_t expected_sum;

/* Returns the number of mismatching words and stores the checksum (sum of the words). */
static size_t verify(uint64_t *sum_out) {
    uint64_t sum = 0;
    size_t bad = 0;
    for (size_t i = 0; i < nwords; i++) {
        uint64_t w = buf[i];
        sum += w;
        if (w != pattern(i)) bad++;
    }
    *sum_out = sum;
    return bad;
}

static int report(void) {
    uint64_t sum;
    size_t bad = verify(&sum);
    printf("hotset: checksum %s sum=%016llx expected=%016llx bad_words=%zu\n",
           bad == 0 && sum == expected_sum ? "ok" : "BAD", (unsigned long long)sum,
           (unsigned long long)expected_sum, bad);
    fflush(stdout);
    return bad == 0 && sum == expected_sum ? 0 : 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: hotset SIZE_MIB HOT_MIB NODE INFO_FILE [DURATION_S]\n");
        return 2;
    }
    size_t size = strtoul(argv[1], NULL, 0) << 20;
    size_t hot = strtoul(argv[2], NULL, 0) << 20;
    int node = atoi(argv[3]);
    const char *info = argv[4];
    double duration = argc > 5 ? atof(argv[5]) : 0;
    if (size == 0 || hot > size || node < 0 || node > 63) {
        fprintf(stderr, "hotset: need 0 < HOT_MIB <= SIZE_MIB and 0 <= NODE < 64\n");
        return 2;
    }

    struct sigaction sa = {0};
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);

    buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *dummy = mmap(NULL, FLUSH_PAGES * PAGE, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED || dummy == MAP_FAILED) {
        perror("hotset: mmap");
        return 1;
    }
    if (madvise(buf, size, MADV_NOHUGEPAGE) != 0) perror("hotset: madvise(MADV_NOHUGEPAGE)");

    /* First touch under a bind policy: every page is allocated on NODE. */
    unsigned long mask = 1UL << node;
    /* HOTSET_PREFERRED: fill NODE as far as the kernel lets an allocation go there and
     * put the rest elsewhere, instead of binding (which OOM-kills at the node's end). */
    int mode = getenv("HOTSET_PREFERRED") ? MPOL_PREFERRED : MPOL_BIND;
    if (syscall(SYS_set_mempolicy, mode, &mask, 64UL) != 0) {
        perror("hotset: set_mempolicy");
        return 1;
    }
    nwords = size / sizeof(uint64_t);
    expected_sum = 0;
    for (size_t i = 0; i < nwords; i++) {
        buf[i] = pattern(i);
        expected_sum += buf[i];
    }
    memset(dummy, 1, FLUSH_PAGES * PAGE);
    if (syscall(SYS_set_mempolicy, MPOL_DEFAULT, NULL, 0UL) != 0) {
        perror("hotset: set_mempolicy(MPOL_DEFAULT)");
        return 1;
    }

    const char *pin = getenv("HOTSET_PIN_PAGES");
    if (pin && atol(pin) > 0) {
        size_t n = (size_t)atol(pin);
        int pfd[2];
        if (pipe(pfd) != 0 || fcntl(pfd[1], F_SETPIPE_SZ, (int)(2 * n * PAGE)) < 0) {
            perror("hotset: pipe for pinning");
            return 1;
        }
        struct iovec iov = {.iov_base = buf, .iov_len = n * PAGE};
        ssize_t got = vmsplice(pfd[1], &iov, 1, 0);
        if (got != (ssize_t)(n * PAGE)) {
            fprintf(stderr, "hotset: vmsplice pinned %zd of %zu bytes\n", got, n * PAGE);
            return 1;
        }
        /* pfd stays open and unread for the life of the process. */
    }

    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", info);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        perror("hotset: info file");
        return 1;
    }
    fprintf(f, "%d %lx %zu %zu\n", (int)getpid(), (unsigned long)buf, size, hot);
    fclose(f);
    if (rename(tmp, info) != 0) {
        perror("hotset: rename info file");
        return 1;
    }

    const volatile char *bytes = (const volatile char *)buf;
    struct timespec pause = {0, 200 * 1000}; /* 200 us between sweeps */
    double start = now_s();
    uint64_t sink = 0;
    while (!stop_flag) {
        for (size_t off = 0; off < hot; off += PAGE) sink += bytes[off];
        /* TCG: force a full TLB flush of this mm (see the header comment). */
        mprotect(dummy, FLUSH_PAGES * PAGE, PROT_READ);
        mprotect(dummy, FLUSH_PAGES * PAGE, PROT_READ | PROT_WRITE);
        if (verify_flag) {
            verify_flag = 0;
            report();
        }
        if (duration > 0 && now_s() - start >= duration) break;
        nanosleep(&pause, NULL);
    }
    (void)sink;
    return report();
}
