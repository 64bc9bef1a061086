import SteleHub
// Scaffold: the libmicrohttpd front lands here (issue 16).
