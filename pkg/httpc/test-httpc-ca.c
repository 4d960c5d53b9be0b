/* SPDX-License-Identifier: Apache-2.0 */
/* A CA given to httpc (a file or PEM bytes: a cluster's CA, Prometheus' or
 * an upstream adapter's ca_file) is the only one trusted, as Go's RootCAs
 * is. Against `openssl s_server` on 127.0.0.1 with a certificate that ca2
 * issued, in a private mount namespace whose /etc/ssl/certs (libcurl's
 * built-in CA directory and bundle on Debian) holds ca2 alone: given ca1 as
 * a file or as bytes, the request fails verification (libcurl loaded the
 * system's directory, and beside bytes its bundle, too, so it passed);
 * given ca2, or none (the system's), it succeeds. Needs root for the mount
 * namespace, else exits 77 (skipped). The server is killed by PID, the
 * certificates removed. Bounded: a few seconds, 10 s per request. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "httpc/httpc.h"
#include "httpc/testsrv.h"
#include "util/util.h"

#define SYSTEM_CERTS "/etc/ssl/certs"

extern char **environ;

static char dir[64];
static pid_t server_pid;
static int port;

struct fx {
    uv_loop_t loop;
    struct httpc *http;
    int done, closed, err;
    long status;
};

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    return system(cmd);
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return ntohs(sa.sin_port);
}

static bool server_up(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* ca1, ca2 and a server certificate for 127.0.0.1 that ca2 issued; a
 * system directory holding ca2 alone (hashed, and as the bundle) mounted on
 * /etc/ssl/certs; the server started. */
static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/httpc-ca-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    const char *key = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    if (sh("set -e; cd %s; exec >/dev/null 2>&1;"
           "for n in ca1 ca2; do openssl req -x509 %s -keyout $n.key -out $n.crt -subj /CN=$n "
           "  -days 2 -addext basicConstraints=critical,CA:TRUE "
           "  -addext keyUsage=critical,keyCertSign; done;"
           "printf 'subjectAltName=IP:127.0.0.1\\n' > srv.ext;"
           "openssl req %s -keyout srv.key -out srv.csr -subj /CN=server;"
           "openssl x509 -req -in srv.csr -CA ca2.crt -CAkey ca2.key -CAcreateserial -days 2 "
           "  -extfile srv.ext -out srv.crt;"
           "mkdir sys; cp ca2.crt sys/; cp ca2.crt sys/ca-certificates.crt;"
           "ln -s ca2.crt sys/$(openssl x509 -hash -noout -in ca2.crt).0",
           dir, key, key) != 0)
        return -1;
    char sys[96];
    snprintf(sys, sizeof(sys), "%s/sys", dir);
    if (mount(sys, SYSTEM_CERTS, NULL, MS_BIND, NULL) != 0)
        return -1;
    if ((port = free_port()) < 0)
        return -1;
    char accept[64], cert[96], keyf[96], logp[96];
    snprintf(accept, sizeof(accept), "127.0.0.1:%d", port);
    snprintf(cert, sizeof(cert), "%s/srv.crt", dir);
    snprintf(keyf, sizeof(keyf), "%s/srv.key", dir);
    snprintf(logp, sizeof(logp), "%s/server.log", dir);
    char *argv[] = {"openssl", "s_server", "-accept", accept, "-cert", cert, "-key", keyf,
                    "-www", "-quiet", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, logp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    int rc = posix_spawnp(&server_pid, "openssl", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return -1;
    for (int i = 0; i < 100 && !server_up(); i++)
        usleep(50000);
    return server_up() ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    if (server_pid > 0) {
        kill(server_pid, SIGKILL);
        waitpid(server_pid, NULL, 0);
    }
    umount2(SYSTEM_CERTS, MNT_DETACH);
    sh("rm -rf %s", dir);
    return 0;
}

static void on_done(struct httpc_req *req, int err, const struct httpc_resp *resp, void *arg)
{
    struct fx *f = arg;
    (void)req;
    f->done++;
    f->err = err;
    f->status = resp->status;
}

static void on_closed(void *arg)
{
    ((struct fx *)arg)->closed++;
}

/* One GET of the server with tls; its error (0: verified, answered 200). */
static int get(const struct httpc_tls *tls)
{
    struct fx f = {0};
    assert_int_equal(uv_loop_init(&f.loop), 0);
    assert_int_equal(httpc_new(&f.loop, &f.http), 0);
    char url[64];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/", port);
    struct httpc_opts o = {.url = url, .tls = tls, .timeout_ms = 10000, .no_reuse = true,
                           .no_proxy = true};
    assert_int_equal(httpc_request(f.http, &o, on_done, &f, NULL), 0);
    assert_true(testsrv_run_until_count(&f.loop, &f.done, 1, 15000));
    httpc_close(f.http, on_closed, &f);
    assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(f.closed, 1);
    assert_int_equal(uv_loop_close(&f.loop), 0);
    if (f.err == 0)
        assert_int_equal(f.status, 200);
    return f.err;
}

static void test_a_given_ca_is_the_only_one(void **state)
{
    (void)state;
    char ca1[96], ca2[96];
    snprintf(ca1, sizeof(ca1), "%s/ca1.crt", dir);
    snprintf(ca2, sizeof(ca2), "%s/ca2.crt", dir);
    /* the controls: the server's own CA, and the system's, which holds it */
    struct httpc_tls tls = {.ca_file = ca2};
    assert_int_equal(get(&tls), 0);
    assert_int_equal(get(NULL), 0);
    /* another CA, as a file: refused, though the system's directory trusts the server */
    tls = (struct httpc_tls){.ca_file = ca1};
    assert_int_equal(get(&tls), -EPROTO);
    /* ...and as bytes: refused, though the system's bundle and directory trust it */
    FILE *fp = fopen(ca1, "rb");
    assert_non_null(fp);
    char pem[8192];
    size_t n = fread(pem, 1, sizeof(pem), fp);
    fclose(fp);
    assert_true(n > 0 && n < sizeof(pem));
    tls = (struct httpc_tls){.ca_blob = pem, .ca_blob_len = n};
    assert_int_equal(get(&tls), -EPROTO);
}

int main(void)
{
    /* before any thread: a mount namespace of this process alone, whose
     * mounts do not propagate back */
    if (geteuid() != 0 || access(SYSTEM_CERTS, F_OK) != 0 || unshare(CLONE_NEWNS) != 0 ||
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        printf("SKIP: needs root (a private mount namespace) and %s\n", SYSTEM_CERTS);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_given_ca_is_the_only_one, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
