/** The time stamps the database keeps (imports, label edits): whole seconds since the epoch. */
export const nowSeconds = () => Math.floor(Date.now() / 1000);
