package kubewasm

import (
	"errors"
	"fmt"
)

// HandleError is a failed Handle call as the host sees it: a message for its log and for the
// Kubernetes Event on the object, and whether to retry.
//
// Retry true asks the host to retry the event with backoff (a transient problem: an object
// the plugin needs is not in the cache yet). Retry false drops the event: use it for
// malformed objects or invalid settings, where retrying cannot help.
//
// Return one from Handle directly, or wrap one: the host gets err.Error() as the message and
// the Retry flag of the first HandleError in the chain (errors.As). Any other error is
// retried.
type HandleError struct {
	Message string
	Retry   bool
	cause   error
}

// Error returns the message.
func (e *HandleError) Error() string { return e.Message }

// Unwrap returns the error this one was made from, if any.
func (e *HandleError) Unwrap() error { return e.cause }

// Permanent marks err as permanent: the host logs it and drops the event. The message is
// err.Error(); Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &HandleError{Message: err.Error(), Retry: false, cause: err}
}

// Permanentf is a permanent error with a formatted message (%w wraps as in fmt.Errorf).
func Permanentf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &HandleError{Message: err.Error(), Retry: false, cause: errors.Unwrap(err)}
}

// Retryable marks err as transient: the host retries the event with backoff. The message is
// err.Error(); Retryable(nil) is nil.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &HandleError{Message: err.Error(), Retry: true, cause: err}
}

// Retryablef is a transient error with a formatted message (%w wraps as in fmt.Errorf).
func Retryablef(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &HandleError{Message: err.Error(), Retry: true, cause: errors.Unwrap(err)}
}

// IsPermanent reports whether the host would drop the event for err (a HandleError with
// Retry false in its chain).
func IsPermanent(err error) bool {
	var he *HandleError
	return errors.As(err, &he) && !he.Retry
}

// AsHandleError is the error the host gets for err: its message, and the Retry flag of the
// first HandleError in its chain (true when there is none). Nil for nil.
func AsHandleError(err error) *HandleError {
	if err == nil {
		return nil
	}
	var he *HandleError
	if errors.As(err, &he) {
		return &HandleError{Message: err.Error(), Retry: he.Retry, cause: err}
	}
	return &HandleError{Message: err.Error(), Retry: true, cause: err}
}
