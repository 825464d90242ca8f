/*
 * placement: where are a process's pages? The harness's own oracle, independent of the
 * daemon's counters.
 *
 *   placement PID ADDR_HEX LEN HOT_LEN [MOVE_NODE]
 *
 * Queries move_pages(2) with nodes = NULL (no move) for every 4 KiB page of
 * [ADDR, ADDR+LEN) of PID, in batches of 1024, and prints one line of shell assignments
 * (the harness `eval`s it):
 *
 *   hot=H hot_n0=A hot_n1=B hot_other=C cold=K cold_n0=D cold_n1=E cold_other=F
 *
 * where the hot part is the first HOT_LEN bytes and the cold part the rest; *_other
 * counts pages on other nodes or with a negative status (-ENOENT: not present, -EFAULT).
 *
 * With MOVE_NODE, it first moves the whole range to MOVE_NODE (MPOL_MF_MOVE, batches of
 * 512 pages, the daemon's default batch size) and adds to the line
 *   moved=M move_errors=X move_ms=T move_pages_per_s=R
 * which the measurement scenario uses as the kernel's raw move_pages(2) throughput.
 * Exit status: 0, or 1 when a call itself failed (ESRCH for a gone pid, EPERM, ...).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define QUERY_BATCH 1024
#define MOVE_BATCH 512
#define MPOL_MF_MOVE (1 << 1)

static long move_pages(int pid, unsigned long n, void **pages, const int *nodes, int *status,
                       int flags) {
    return syscall(SYS_move_pages, pid, n, pages, nodes, status, flags);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: placement PID ADDR_HEX LEN HOT_LEN [MOVE_NODE]\n");
        return 2;
    }
    int pid = atoi(argv[1]);
    unsigned long addr = strtoul(argv[2], NULL, 16);
    unsigned long len = strtoul(argv[3], NULL, 0);
    unsigned long hot_len = strtoul(argv[4], NULL, 0);
    int move_node = argc > 5 ? atoi(argv[5]) : -1;
    unsigned long npages = len / PAGE, nhot = hot_len / PAGE;

    void *pages[QUERY_BATCH];
    int nodes[QUERY_BATCH], status[QUERY_BATCH];

    unsigned long moved = 0, move_errors = 0;
    double move_s = 0;
    if (move_node >= 0) {
        double t0 = now_s();
        for (unsigned long i = 0; i < npages; i += MOVE_BATCH) {
            unsigned long n = npages - i < MOVE_BATCH ? npages - i : MOVE_BATCH;
            for (unsigned long j = 0; j < n; j++) {
                pages[j] = (void *)(addr + (i + j) * PAGE);
                nodes[j] = move_node;
            }
            if (move_pages(pid, n, pages, nodes, status, MPOL_MF_MOVE) < 0) {
                fprintf(stderr, "placement: move_pages(pid %d, move to %d): %s\n", pid,
                        move_node, strerror(errno));
                return 1;
            }
            for (unsigned long j = 0; j < n; j++) {
                if (status[j] == move_node) moved++;
                else move_errors++;
            }
        }
        move_s = now_s() - t0;
    }

    unsigned long cnt[2][3] = {{0}}; /* [hot/cold][n0, n1, other] */
    for (unsigned long i = 0; i < npages; i += QUERY_BATCH) {
        unsigned long n = npages - i < QUERY_BATCH ? npages - i : QUERY_BATCH;
        for (unsigned long j = 0; j < n; j++) pages[j] = (void *)(addr + (i + j) * PAGE);
        if (move_pages(pid, n, pages, NULL, status, 0) < 0) {
            fprintf(stderr, "placement: move_pages(pid %d, query): %s\n", pid, strerror(errno));
            return 1;
        }
        for (unsigned long j = 0; j < n; j++) {
            int part = i + j < nhot ? 0 : 1;
            int s = status[j];
            cnt[part][s == 0 ? 0 : s == 1 ? 1 : 2]++;
        }
    }
    printf("hot=%lu hot_n0=%lu hot_n1=%lu hot_other=%lu cold=%lu cold_n0=%lu cold_n1=%lu "
           "cold_other=%lu",
           nhot, cnt[0][0], cnt[0][1], cnt[0][2], npages - nhot, cnt[1][0], cnt[1][1],
           cnt[1][2]);
    if (move_node >= 0)
        printf(" moved=%lu move_errors=%lu move_ms=%.0f move_pages_per_s=%.0f", moved,
               move_errors, move_s * 1e3, move_s > 0 ? moved / move_s : 0.0);
    printf("\n");
    return 0;
}
