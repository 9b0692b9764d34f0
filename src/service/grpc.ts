/** envoy.service.ratelimit.v3.RateLimitService over gRPC (placeholder: replaced by the gRPC work). */
import type { ServiceContext } from './context.js';

export interface GrpcServer {
  readonly port: number;
  close(): Promise<void>;
}

export async function startGrpcServer(_ctx: ServiceContext, _host: string, _port: number): Promise<GrpcServer | undefined> {
  return undefined;
}
