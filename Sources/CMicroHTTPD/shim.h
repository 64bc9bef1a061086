#ifndef STELE_CMICROHTTPD_SHIM_H
#define STELE_CMICROHTTPD_SHIM_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <sys/types.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <microhttpd.h>

// What Swift cannot call in libmicrohttpd: the variadic MHD_start_daemon and
// MHD_get_*_info, and the va_list logger. Everything else is called directly.

/// Where MHD's own error messages go: a Swift function and its context.
struct stele_mhd_log_sink {
    void (*write)(void *cls, const char *message);
    void *cls;
};

/// MHD_OPTION_EXTERNAL_LOGGER's callback: formats the message and hands it on.
static inline void stele_mhd_log_trampoline(void *cls, const char *format, va_list arguments) {
    const struct stele_mhd_log_sink *sink = (const struct stele_mhd_log_sink *)cls;
    char message[512];
    vsnprintf(message, sizeof message, format, arguments);
    size_t length = strlen(message);
    while (length > 0 && (message[length - 1] == '\n' || message[length - 1] == '\r')) {
        message[--length] = '\0';
    }
    sink->write(sink->cls, message);
}

/// Fills `storage` with `host:port` (an IPv4 or IPv6 literal). Returns
/// AF_INET or AF_INET6, or 0 when `host` is neither.
static inline int stele_mhd_make_address(const char *host, uint16_t port, struct sockaddr_storage *storage) {
    memset(storage, 0, sizeof *storage);
    struct sockaddr_in *v4 = (struct sockaddr_in *)storage;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        return AF_INET;
    }
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)storage;
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        return AF_INET6;
    }
    return 0;
}

/// MHD_start_daemon with the options the hub uses, as one MHD_OPTION_ARRAY.
/// `thread_pool_size` ≤ 1 runs one internal thread; null TLS strings leave TLS off
/// (the caller adds MHD_USE_TLS to `flags` when it passes them). The strings
/// must outlive the daemon.
static inline struct MHD_Daemon *stele_mhd_start(
    unsigned int flags,
    const struct sockaddr *address,
    MHD_AccessHandlerCallback access, void *access_cls,
    MHD_RequestCompletedCallback completed, void *completed_cls,
    void *(*uri_log)(void *cls, const char *uri, struct MHD_Connection *connection), void *uri_log_cls,
    struct stele_mhd_log_sink *log_sink,
    unsigned int thread_pool_size,
    unsigned int connection_limit,
    unsigned int connection_timeout_seconds,
    size_t connection_memory_limit_bytes,
    unsigned int listen_backlog,
    const char *tls_cert_pem,
    const char *tls_key_pem) {
    struct MHD_OptionItem items[16];
    int n = 0;
    // The logger goes first, or libmicrohttpd warns (through its default logger) that it did not.
    if (log_sink != NULL) {
        items[n++] = (struct MHD_OptionItem){ MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)&stele_mhd_log_trampoline, log_sink };
    }
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_SOCK_ADDR, 0, (void *)address };
    if (thread_pool_size > 1) {
        items[n++] = (struct MHD_OptionItem){ MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)thread_pool_size, NULL };
    }
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_LIMIT, (intptr_t)connection_limit, NULL };
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)connection_timeout_seconds, NULL };
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)connection_memory_limit_bytes, NULL };
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_LISTEN_BACKLOG_SIZE, (intptr_t)listen_backlog, NULL };
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed, completed_cls };
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)uri_log, uri_log_cls };
    if (tls_cert_pem != NULL && tls_key_pem != NULL) {
        items[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)tls_cert_pem };
        items[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)tls_key_pem };
    }
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
    return MHD_start_daemon(flags, 0, NULL, NULL, access, access_cls, MHD_OPTION_ARRAY, items, MHD_OPTION_END);
}

/// The port the daemon listens on (the one the kernel picked for port 0); 0 when unknown.
static inline uint16_t stele_mhd_bind_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

/// The connection's socket; -1 when unknown.
static inline int stele_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

/// The status libmicrohttpd sent or queued (its own 4xx for a malformed request
/// included); 0 when none.
static inline unsigned int stele_mhd_connection_status(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_HTTP_STATUS);
    return info == NULL ? 0 : info->http_status;
}

/// Whether the peer of a parked (suspended) connection has gone: end of stream
/// or an error on a non-blocking peek. Bytes waiting (a pipelined request, a TLS
/// alert) count as still there.
static inline int stele_socket_peer_gone(int fd) {
    char byte;
    ssize_t got = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (got > 0) return 0;
    if (got == 0) return 1;
    return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : 1;
}

/// Raises the soft RLIMIT_NOFILE to the hard limit; returns the soft limit in force.
static inline unsigned long long stele_raise_open_files_limit(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
    if (limit.rlim_cur < limit.rlim_max) {
        struct rlimit raised = limit;
        raised.rlim_cur = limit.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
    }
    return (unsigned long long)limit.rlim_cur;
}

#endif
