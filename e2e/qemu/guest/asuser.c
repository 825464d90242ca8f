/*
 * asuser: run a command as an unprivileged user (the harness's "unprivileged run").
 *
 *   asuser UID COMMAND [ARGS...]
 *
 * Drops supplementary groups, then setgid(UID) and setuid(UID). A root process that
 * setuid()s to a non-zero uid loses every capability (permitted, effective, ambient;
 * no SECBIT_KEEP_CAPS), so COMMAND runs with CapEff = 0 — what a plain user gets.
 * busybox-static has no setuidgid, and its su needs an /etc/passwd entry.
 */
#define _GNU_SOURCE
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: asuser UID COMMAND [ARGS...]\n");
        return 2;
    }
    uid_t uid = (uid_t)strtoul(argv[1], NULL, 10);
    if (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0) {
        perror("asuser: dropping privileges");
        return 1;
    }
    execvp(argv[2], argv + 2);
    perror("asuser: exec");
    return 127;
}
