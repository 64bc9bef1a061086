#ifndef STELE_CMICROHTTPD_SHIM_H
#define STELE_CMICROHTTPD_SHIM_H

#include <stdarg.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <microhttpd.h>

// MHD_start_daemon and MHD_get_daemon_info are variadic, which Swift cannot
// call: these wrappers pass the options the hub uses as one MHD_OPTION_ARRAY.

/// Starts an epoll daemon with a thread pool, suspend/resume allowed, bound to
/// `address` (IPv4), TLS when `certificate` and `key` (PEM) are not NULL.
static inline struct MHD_Daemon *stele_mhd_start(
    unsigned int extra_flags, const struct sockaddr_in *address,
    MHD_AccessHandlerCallback handler, void *handler_context,
    MHD_RequestCompletedCallback completed, void *completed_context,
    unsigned int threads, unsigned int connection_limit, size_t memory_limit,
    unsigned int timeout_seconds, const char *certificate, const char *key)
{
    struct MHD_OptionItem options[10];
    int count = 0;
    options[count++] = (struct MHD_OptionItem){ MHD_OPTION_SOCK_ADDR, 0, (void *)address };
    options[count++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed, completed_context };
    options[count++] = (struct MHD_OptionItem){ MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)threads, NULL };
    options[count++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_LIMIT, (intptr_t)connection_limit, NULL };
    options[count++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)memory_limit, NULL };
    options[count++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)timeout_seconds, NULL };
    unsigned int flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_INTERNAL_POLLING_THREAD | MHD_ALLOW_SUSPEND_RESUME | extra_flags;
    if (certificate != NULL && key != NULL) {
        options[count++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)certificate };
        options[count++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)key };
        flags |= MHD_USE_TLS;
    }
    options[count++] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
    return MHD_start_daemon(flags, ntohs(address->sin_port), NULL, NULL, handler, handler_context,
                            MHD_OPTION_ARRAY, options, MHD_OPTION_END);
}

/// The port the daemon is bound to (the one it picked when asked for port 0).
static inline uint16_t stele_mhd_port(struct MHD_Daemon *daemon)
{
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

/// Whether this libmicrohttpd was built with TLS.
static inline int stele_mhd_has_tls(void)
{
    return MHD_is_feature_supported(MHD_FEATURE_TLS) == MHD_YES;
}

#endif
