// An error answered on the wire: an HTTP status, the request field it names, and OpenAI's error
// body ({ error: { message, type, param, code } }), so that OpenAI's clients show it as they
// show OpenAI's own. Still a DTorchError with a code, as everything the library throws.
import { DTorchError, ErrorCode } from '@dtorch/common';

/** OpenAI's error body. */
export interface ErrorBody {
  /** The error. */
  error: {
    /** What was wrong and how to fix it. */
    message: string;
    /** OpenAI's kind: invalid_request_error, authentication_error, not_found_error, rate_limit_error, server_error. */
    type: string;
    /** The request field it names, or null. */
    param: string | null;
    /** A DTorchError code or the server's own (QUEUE_FULL, SHUTTING_DOWN, ...). */
    code: string;
  };
}

/** A request the service refuses: `status` (4xx), the field `param` it names (null for none). */
export class RequestError extends DTorchError {
  /**
   * @param status The HTTP status.
   * @param param The request field it names, or null.
   * @param message What was wrong.
   * @param code The error code (default from the status).
   */
  constructor(
    readonly status: number,
    readonly param: string | null,
    message: string,
    code: string = status === 404 ? ErrorCode.NotFound : status === 401 ? ErrorCode.AccessDenied : ErrorCode.InvalidArgument,
  ) {
    super(code, message);
    this.name = 'RequestError';
  }

  /** The body sent with it. */
  body(): ErrorBody {
    const type = this.status === 401 ? 'authentication_error' : this.status === 404 ? 'not_found_error' : this.status === 429 ? 'rate_limit_error' : this.status >= 500 ? 'server_error' : 'invalid_request_error';
    return { error: { message: this.message, type, param: this.param, code: this.code } };
  }
}
