#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static void *worker(void *arg) {
    char *b = malloc(128 << 10);
    memset(b, 1, 128 << 10);
    return b;
}
int main(void) {
    char *a = malloc(256 << 10);
    memset(a, 2, 256 << 10);
    pid_t c = fork();
    if (c == 0) {
        char *b = malloc(128 << 10);
        memset(b, 3, 128 << 10);
        _exit(b[5] + a[7]);
    }
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    waitpid(c, NULL, 0);
    return a[3] == 2 ? 0 : 1;
}
